"""The record a measurement script writes: where and when it ran, under what load, and its rows,
as JSON and Markdown (benchmarks/seeds_agreement.py, benchmarks/seeds_together.py)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from fedbench.runner.bench_suite import device_name


def measurement(device: torch.device, load_before: float, rows: list[dict[str, Any]]) -> dict:
    """The device, the time (UTC), torch, the threads and cores, the 1-minute load average
    before and after, the script's arguments, and the rows."""
    return {
        "device": device_name(device),
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cores": os.cpu_count(),
        "load_before": load_before,
        "load_after": round(os.getloadavg()[0], 2),
        "argv": sys.argv[1:],
        "rows": rows,
    }


def write_measurement(
    result: dict,
    json_path: Path | None,
    markdown_path: Path | None,
    markdown: Callable[[dict], str],
) -> None:
    """`result` as JSON and as `markdown(result)`, each where a path is given."""
    for path, text in (
        (json_path, json.dumps(result, indent=2) + "\n"),
        (markdown_path, markdown(result)),
    ):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
