"""SIGTERM ends a fedbench command the way Ctrl-C does, instead of killing it on the spot.

Python's default for SIGTERM is to die at once: no `finally`, no context manager exit, so every
temporary folder a command made (`--smoke`'s fedbench-smoke-*, `--estimate`'s probes, `bench`'s
runs) stayed in TMPDIR, and a run being trained lost the line that says how to resume it. With
`install()` (the console entry point calls it) SIGTERM raises `Terminated`, a KeyboardInterrupt:
each temporary folder is removed as the stack unwinds, a file being written is finished or its
temporary removed (fedbench.files), worker processes are stopped, and the command ends with its
interrupted line and exit code 143 (128 + SIGTERM).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

#: Set once a SIGTERM has arrived: the command's interrupted line then exits 143, not 130.
received = threading.Event()


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: unwound like a Ctrl-C (KeyboardInterrupt), exit code 143."""

    exit_code = 128 + signal.SIGTERM


def raise_terminated(signum: int, frame: FrameType | None) -> None:
    """The SIGTERM handler `install` sets."""
    received.set()
    raise Terminated


def install() -> None:
    """SIGTERM raises Terminated in the main thread, unless someone (a launcher, a test) already
    set a handler of their own."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, raise_terminated):
        signal.signal(signal.SIGTERM, raise_terminated)


def installed() -> bool:
    return signal.getsignal(signal.SIGTERM) is raise_terminated
