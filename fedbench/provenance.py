"""Where the code and the data of a run came from, for summary.json and config.yaml."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

#: The folder above the package: a git checkout when fedbench runs from source.
SOURCE_ROOT = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(SOURCE_ROOT), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def git_state() -> dict[str, Any] | None:
    """{"commit": sha, "dirty": uncommitted changes to tracked files} of the checkout fedbench
    runs from; None for an installed package (no .git beside it) or without git."""
    if not (SOURCE_ROOT / ".git").exists() or shutil.which("git") is None:
        return None
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return None
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status) if status is not None else None}
