"""The one way fedbench writes a file: atomically, so that a kill, a full disk or a Ctrl-C never
leaves half a file under the real name, and never destroys the previous complete one.

`write_file(path, content)` writes to a temporary file in the same folder
(`.<name>.<pid>.<random>.tmp`: unique per process, so two processes writing one file cannot rename
each other's half-written copy into place), flushes and fsyncs it, then renames it over `path`
(rename(2) within one file system is atomic: readers see the old file or the new one). On any
failure, an OSError or an interrupt, the temporary is removed and the error raised; the previous
`path` is untouched. Text is always written as UTF-8, whatever the locale (a report holds `±`).

A process killed between creating and renaming its temporary leaves it behind;
`remove_stale_temporaries(folder)` (called by whoever writes into the folder next) deletes those
whose process is gone, and keeps the ones of a live process, which is still writing them.

`temporary_folder(prefix)` is the one way fedbench makes a scratch folder (the smoke check, the
probe, the benches): removed however the block ends, an interrupt during its making included.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

#: What `write_file` writes: text (UTF-8), bytes, or a function writing to a binary file
#: (torch.save, matplotlib's savefig, pandas' to_csv into a buffer).
Content = str | bytes | Callable[[IO[bytes]], None]

_TEMPORARY = re.compile(r"^\..+\.(\d+)\.[0-9a-f]{8}\.tmp$")


def temporary_name(path: Path) -> Path:
    """The temporary `write_file` writes before renaming it to `path`."""
    return path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """A Ctrl-C (SIGINT) that arrives inside the block is raised as KeyboardInterrupt when the
    block ends, not in the middle of it: a file being written is finished (or its temporary
    removed) first. torch.save, for one, turns an interrupt inside its writer into a RuntimeError
    about the file position, which would read as a failed run. Only in the main thread, and only
    over Python's own handler (a test's or a launcher's handler is left alone)."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    pending: list[int] = []
    signal.signal(signal.SIGINT, lambda number, _frame: pending.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pending:
        raise KeyboardInterrupt


@contextmanager
def temporary_folder(prefix: str) -> Iterator[Path]:
    """A new folder in TMPDIR (`prefix` + random), removed when the block ends, however it ends.

    tempfile.TemporaryDirectory registers its cleanup only after mkdtemp has returned, so a
    Ctrl-C (or a SIGTERM, which the command line turns into one) landing just after the mkdir
    left the folder behind: the moment a watcher sees the folder appear is the moment that is
    most likely, and on a loaded machine it happened in 2 of 6 tries. Here the folder is made,
    and removed, with interrupts deferred (`interrupts_deferred`): an interrupt arriving then is
    raised once the folder is made and its removal is certain to run, or once it is gone."""
    holder: tempfile.TemporaryDirectory[str] | None = None
    try:
        with interrupts_deferred():
            holder = tempfile.TemporaryDirectory(prefix=prefix)
        yield Path(holder.name)
    finally:
        if holder is not None:
            with interrupts_deferred():
                holder.cleanup()


def write_file(path: Path, content: Content) -> None:
    """Write `content` to `path` atomically (see the module docstring); a Ctrl-C meanwhile is
    raised once the write is complete (`interrupts_deferred`)."""
    with interrupts_deferred():
        _write(path, content)


def _write(path: Path, content: Content) -> None:
    tmp = temporary_name(path)
    try:
        with open(tmp, "wb") as fh:
            if isinstance(content, str):
                fh.write(content.encode("utf-8"))
            elif isinstance(content, bytes):
                fh.write(content)
            else:
                content(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename in (None, str(tmp)):  # the one line names the file being written
            exc.filename = str(path)
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    """`data` as indented JSON, written atomically."""
    write_file(path, json.dumps(data, indent=2) + "\n")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Delete the temporaries `write_file` left in `folder` (not below it) when its process
    died before renaming them; return what was removed. Temporaries of live processes on this
    machine stay (they are being written)."""
    removed: list[Path] = []
    try:
        entries = list(folder.iterdir())
    except OSError:  # no folder (yet), or not one: nothing to clean
        return removed
    for path in entries:
        found = _TEMPORARY.match(path.name)
        if found is None or _alive(int(found.group(1))):
            continue
        try:
            path.unlink()
        except OSError:  # a read-only disk, or another process removed it first
            continue
        removed.append(path)
    return removed


#: Longest file-name component fedbench derives from a name (file systems allow 255 bytes;
#: suffixes such as `-tune` or `-<fingerprint>` and temporaries' `.<pid>.<hex>.tmp` come on top).
MAX_NAME = 96


def safe_name(label: str) -> str:
    """`label` as one file-name component that cannot leave its parent folder, of at most
    MAX_NAME characters, and never the same for two different labels.

    Anything but letters, digits and `._-` becomes `-`, and leading/trailing dots and dashes go
    ("../x" -> "x", "" or ".." -> "unnamed"). Where that changed the label, or it is longer than
    MAX_NAME, an 8-digit hash of the whole label follows (`x-1f2e3d4c`), so that "α" and "β",
    or "a/b" and "a-b", or two long names sharing their first 96 characters, are two folders.
    """
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip(".-") or "unnamed"
    if name == label and len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(label.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{name[: MAX_NAME - 9].rstrip('.-') or 'unnamed'}-{digest}"


def save_figure(fig: Any, path: Path, **kwargs: Any) -> None:
    """A matplotlib figure written atomically, in the format `path`'s suffix names."""
    write_file(path, lambda fh: fig.savefig(fh, format=path.suffix.lstrip(".").lower(), **kwargs))
