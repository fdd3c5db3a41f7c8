"""Checkpoints that are atomic, checksummed, and load with torch.load(weights_only=True).

`checkpoint.pt` is written to a temp file and renamed, so a crash never leaves half a file under
the real name; its SHA-256 (computed while writing, so the tensors are not read twice) goes to
`checkpoint.json` beside it. A checkpoint whose bytes do not match, whose checksum file is
missing, that torch cannot read (a truncated copy, a bit flip, a disk that filled up), or whose
content the engine's check refuses (a malformed state, or one that names another run: a folder
copied over another) is set aside as `checkpoint.pt.corrupt` with a warning, and the run restarts
from round 0 instead of crashing, losing rows of metrics.jsonl or resuming from garbage.
A failed write (a full disk) removes its temp file, so that it does not keep the disk full.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, cast

import torch

from fedbench.engine.run_folder import utc_text, write_json_atomic
from fedbench.files import write_file
from fedbench.readback import BadFile, Checksum, read_json_dict

log = logging.getLogger("fedbench")

_CHUNK = 1 << 20


class _HashingWriter:
    """A write-only file wrapper that hashes what torch.save writes through it."""

    def __init__(self, fh: IO[bytes]) -> None:
        self.fh = fh
        self.sha256 = hashlib.sha256()
        self.size = 0
        #: What stopped a write: an OSError (a full disk) or a Ctrl-C. torch's C++ writer reports
        #: either only as a RuntimeError about the file position, so save_checkpoint raises this
        #: one instead (a Ctrl-C stays a Ctrl-C: one line and exit 130, not a failed run).
        self.error: BaseException | None = None

    def write(self, data: bytes) -> int:
        try:
            written = self.fh.write(data)
        except BaseException as exc:
            self.error = exc
            raise
        self.sha256.update(data)
        self.size += len(data)
        return written

    def flush(self) -> None:
        self.fh.flush()


def checksum_path(path: Path) -> Path:
    return path.with_suffix(".json")


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """Write `state` to `path` (fedbench.files.write_file: atomic) and its checksum file."""
    writers: list[_HashingWriter] = []

    def dump(fh: IO[bytes]) -> None:
        writers.append(writer := _HashingWriter(fh))
        try:
            # torch.save writes to any object with write and flush; its annotation says IO.
            torch.save(state, cast(IO[bytes], writer))
        except RuntimeError:
            if writer.error is not None:
                raise writer.error from None
            raise

    # The data first, then its checksum: a crash between the two renames leaves a pair that
    # does not match, which loads as "corrupt" (a restart), never as a wrong resume.
    write_file(path, dump)
    writer = writers[0]
    write_json_atomic(
        checksum_path(path),
        {
            "sha256": writer.sha256.hexdigest(),
            "bytes": writer.size,
            "round": state.get("round"),
            "written": utc_text(time.time()),  # for "resuming RUN from round N (checkpoint of T)"
        },
    )


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _problem(path: Path) -> str | None:
    """Why the checkpoint at `path` cannot be trusted, or None when its checksum matches."""
    try:
        expected = read_json_dict(checksum_path(path), Checksum, fix="")
    except FileNotFoundError:
        return f"its checksum file {checksum_path(path).name} is missing"
    except BadFile as bad:
        return f"its checksum file {checksum_path(path).name} is unusable ({bad.what})"
    size = path.stat().st_size
    if size != expected.get("bytes"):
        return f"it has {size} bytes where {expected.get('bytes')} were written"
    if file_sha256(path) != expected.get("sha256"):
        return "its SHA-256 does not match the one recorded when it was written"
    return None


def load_checkpoint(
    path: Path, device: torch.device, check: Callable[[Any], str | None] | None = None
) -> dict[str, Any] | None:
    """The checkpoint's state, or None when there is none or it is corrupt (then with a warning).

    `check(state)` says what is wrong with a state that loaded (None: nothing); it runs before
    the caller touches anything, so a refused checkpoint costs a restart, never data.
    """
    if not path.exists():
        return None
    if path.is_dir():
        problem: str | None = "it is a folder, not a file"
    elif not path.is_file():  # a FIFO would block the checksum's read of it
        problem = "it is not a regular file"
    else:
        problem = _problem(path)
    if problem is None:
        try:
            state = torch.load(path, map_location=device, weights_only=True)
        except Exception as exc:  # a matching checksum over bytes torch cannot read
            problem = f"torch cannot read it ({type(exc).__name__}: {exc})"
        else:
            problem = check(state) if check is not None else None
            if problem is None:
                return state
    aside = path.with_name(path.name + ".corrupt")
    if aside.is_dir():
        import shutil

        shutil.rmtree(aside)
    os.replace(path, aside)
    _drop_checksum(checksum_path(path))
    log.warning(
        "warning: checkpoint %s is corrupt (%s); moved it to %s and restarting the run from round 0",
        path,
        problem,
        aside.name,
    )
    return None


def _drop_checksum(path: Path) -> None:
    """Remove the checksum file of a checkpoint set aside; what is not a regular file in its place
    (a FIFO, a folder) is not fedbench's to delete: it is moved to `<name>.corrupt`."""
    if path.is_symlink() or not path.exists() or path.is_file():
        path.unlink(missing_ok=True)
        return
    aside = path.with_name(path.name + ".corrupt")
    if aside.is_dir() and not aside.is_symlink():
        import shutil

        shutil.rmtree(aside)
    os.replace(path, aside)


def remove_checkpoint(path: Path) -> None:
    """Delete a checkpoint and its checksum file (the run finished)."""
    path.unlink(missing_ok=True)
    checksum_path(path).unlink(missing_ok=True)
