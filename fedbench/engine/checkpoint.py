"""Atomic checkpoints (temp file, then rename) that load with torch.load(weights_only=True)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def load_checkpoint(path: Path, device: torch.device) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    return torch.load(path, map_location=device, weights_only=True)
