"""Hostile files in place of the ones fedbench reads back: a FIFO, JSON nested 100,000 deep, an
8 GiB sparse file (`truncate -s 8G`: no disk space used)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

#: What `hostile` can put in place of a file.
KINDS = ("fifo", "deep", "huge")


def hostile(path: Path, kind: str) -> None:
    """Replace the file at `path` with a hostile one of `kind` (KINDS)."""
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    elif kind == "huge":
        with open(path, "wb") as fh:
            fh.truncate(8 * 2**30)
    else:
        raise ValueError(kind)


@contextlib.contextmanager
def fifos_unblocked(folder: Path, after_s: float = 5.0) -> Iterator[None]:
    """While the block runs, every FIFO in `folder` that a reader waits on is opened for writing
    and closed again after `after_s` seconds: a reader that blocks on one (the bug) reads an empty
    file and the test fails on what it asserts, instead of hanging the suite."""
    done = threading.Event()

    def unblock() -> None:
        if done.wait(after_s):
            return
        while not done.wait(0.2):
            for path in folder.rglob("*"):
                with contextlib.suppress(OSError):  # ENXIO: no reader waits on it
                    if path.is_fifo():
                        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))

    thread = threading.Thread(target=unblock, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
