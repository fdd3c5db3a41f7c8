"""metrics.jsonl as an append-only log: one JSON object per line, each line ending in a newline.

A process that dies mid-write (SIGKILL, a full disk) leaves a torn last line. Readers take the
log as a database replays its journal: the rows up to the first line that is not a complete JSON
object, and nothing after it; `truncate` cuts the file back to a row boundary (which needs no free
disk space), so that the next append starts on a clean line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def _scan(data: bytes) -> tuple[list[dict[str, Any]], list[int]]:
    """The valid rows and, per row, the byte offset just after its newline."""
    rows: list[dict[str, Any]] = []
    ends: list[int] = []
    start = 0
    while (end := data.find(b"\n", start)) != -1:
        line = data[start:end]
        if line.strip():
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                break
            if not isinstance(row, dict):
                break
            rows.append(row)
            ends.append(end + 1)
        elif ends:
            ends[-1] = end + 1  # a blank line belongs to the row before it
        start = end + 1
    return rows, ends


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The complete rows of the log at `path` ([] when it does not exist)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    return _scan(data)[0]


def truncate(path: Path, rows: int) -> int:
    """Keep the first `rows` complete rows (fewer if the log has fewer); return how many it kept."""
    data = path.read_bytes()
    _, ends = _scan(data)
    kept = min(rows, len(ends))
    size = ends[kept - 1] if kept else 0
    if size != len(data):
        os.truncate(path, size)
    return kept
