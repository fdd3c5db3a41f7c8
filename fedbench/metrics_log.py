"""metrics.jsonl as an append-only log: one JSON object per line, each line ending in a newline.

A process that dies mid-write (SIGKILL, a full disk) leaves a torn last line. Readers take the
log as a database replays its journal: the rows up to the first line that is not a complete, valid
row (a JSON object that fedbench.readback.MetricsRow accepts: a whole `round`, numbers for the
metrics), and nothing after it; `truncate` cuts the file back to a row boundary (which needs no free
disk space), so that the next append starts on a clean line.

The log is read as a stream, line by line, from a regular file of at most MAX_METRICS_BYTES with
lines of at most MAX_LINE_BYTES (fedbench.readback.open_regular): a FIFO, an 8 GB file or a
line with no end is refused (strict) or taken as no rows, never read into memory or waited on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from fedbench.readback import (
    MAX_JSON_DEPTH,
    BadFile,
    MetricsRow,
    MiB,
    json_depth,
    open_regular,
    problem_text,
    size_text,
)

#: The largest metrics.jsonl fedbench reads: a row is a few hundred bytes (a few KiB with
#: per-client diagnostics), so this holds millions of evaluations.
MAX_METRICS_BYTES = 2048 * MiB

#: The longest row: a thousand times the longest fedbench writes.
MAX_LINE_BYTES = 16 * MiB


def _problem(line: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """(the row, None) for a valid line, else (None, what is wrong with it)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"not JSON ({exc})"
    if json_depth(text) is None:
        return None, f"nests lists or objects more than {MAX_JSON_DEPTH} deep"
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc})"
    if not isinstance(row, dict):
        return None, f"a {type(row).__name__}, not a row"
    try:
        MetricsRow.model_validate(row)
    except ValidationError as exc:
        return None, problem_text(exc)
    return row, None


def _scan(fh: IO[bytes]) -> tuple[list[dict[str, Any]], list[int], str | None]:
    """The valid rows read from `fh`, per row the byte offset just after its newline, and what is
    wrong with the first complete (newline-ended) line that is not a valid row (None: nothing).
    Line by line: a line longer than MAX_LINE_BYTES is a problem, read no further than that."""
    rows: list[dict[str, Any]] = []
    ends: list[int] = []
    offset = 0
    while line := fh.readline(MAX_LINE_BYTES + 1):
        if not line.endswith(b"\n"):
            if len(line) > MAX_LINE_BYTES:
                where = f"line {len(rows) + 1}"
                return rows, ends, f"{where}: longer than {size_text(MAX_LINE_BYTES)}"
            break  # a torn last line
        offset += len(line)
        if line.strip():
            row, problem = _problem(line[:-1])
            if row is None:
                return rows, ends, f"line {len(rows) + 1}: {problem}"
            rows.append(row)
            ends.append(offset)
        elif ends:
            ends[-1] = offset  # a blank line belongs to the row before it
        if offset > MAX_METRICS_BYTES:  # it grew past the bound while being read
            return rows, ends, f"grew past {size_text(MAX_METRICS_BYTES)}"
    return rows, ends, None


def read_rows(path: Path, *, strict: bool = False, fix: str = "") -> list[dict[str, Any]]:
    """The complete rows of the log at `path` ([] when it does not exist or is a folder).

    `strict` (the log of a finished run, which no writer is appending to): a complete line that
    is not a valid row, or a file that is not a regular file of bounded size, is a BadFile (with
    `fix`) instead of the end of the log (or no rows)."""
    try:
        with open_regular(path, fix, MAX_METRICS_BYTES) as fh:
            rows, _, problem = _scan(fh)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except BadFile as bad:
        if strict and bad.what != "is a folder, not a file":
            raise
        return []
    if strict and problem is not None:
        raise BadFile(path, problem, fix)
    return rows


def truncate(path: Path, rows: int) -> int:
    """Keep the first `rows` complete rows (fewer if the log has fewer); return how many it kept."""
    with open_regular(path, "", MAX_METRICS_BYTES) as fh:
        _, ends, _ = _scan(fh)
        length = os.fstat(fh.fileno()).st_size
    kept = min(rows, len(ends))
    size = ends[kept - 1] if kept else 0
    if size != length:
        os.truncate(path, size)
    return kept
