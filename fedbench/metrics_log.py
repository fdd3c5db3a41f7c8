"""metrics.jsonl as an append-only log: one JSON object per line, each line ending in a newline.

A process that dies mid-write (SIGKILL, a full disk) leaves a torn last line. Readers take the
log as a database replays its journal: the rows up to the first line that is not a complete, valid
row (a JSON object that fedbench.readback.MetricsRow accepts: a whole `round`, numbers for the
metrics), and nothing after it; `truncate` cuts the file back to a row boundary (which needs no free
disk space), so that the next append starts on a clean line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fedbench.readback import BadFile, MetricsRow, problem_text


def _problem(line: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """(the row, None) for a valid line, else (None, what is wrong with it)."""
    try:
        row = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"not JSON ({exc})"
    if not isinstance(row, dict):
        return None, f"a {type(row).__name__}, not a row"
    try:
        MetricsRow.model_validate(row)
    except ValidationError as exc:
        return None, problem_text(exc)
    return row, None


def _scan(data: bytes) -> tuple[list[dict[str, Any]], list[int], str | None]:
    """The valid rows, per row the byte offset just after its newline, and what is wrong with
    the first complete (newline-ended) line that is not a valid row (None: nothing)."""
    rows: list[dict[str, Any]] = []
    ends: list[int] = []
    start = 0
    while (end := data.find(b"\n", start)) != -1:
        line = data[start:end]
        if line.strip():
            row, problem = _problem(line)
            if row is None:
                return rows, ends, f"line {len(rows) + 1}: {problem}"
            rows.append(row)
            ends.append(end + 1)
        elif ends:
            ends[-1] = end + 1  # a blank line belongs to the row before it
        start = end + 1
    return rows, ends, None


def read_rows(path: Path, *, strict: bool = False, fix: str = "") -> list[dict[str, Any]]:
    """The complete rows of the log at `path` ([] when it does not exist or is not a file).

    `strict` (the log of a finished run, which no writer is appending to): a complete line that
    is not a valid row is a BadFile (with `fix`) instead of the end of the log."""
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return []
    rows, _, problem = _scan(data)
    if strict and problem is not None:
        raise BadFile(path, problem, fix)
    return rows


def truncate(path: Path, rows: int) -> int:
    """Keep the first `rows` complete rows (fewer if the log has fewer); return how many it kept."""
    data = path.read_bytes()
    _, ends, _ = _scan(data)
    kept = min(rows, len(ends))
    size = ends[kept - 1] if kept else 0
    if size != len(data):
        os.truncate(path, size)
    return kept
