"""Disk faults a user meets (a full disk, a read-only or unwritable --out) as one line.

The CLI turns an OSError with one of these errno values into `error: <what failed>: <where>;
<what to do>` and exit code 2 instead of a traceback: every writer removes its temp file when a
write fails, and runs resume from their checkpoints, so rerunning the same command once the cause
is fixed carries on where it stopped. Other OSErrors are bugs and keep their traceback.
"""

from __future__ import annotations

import errno
import os
import uuid
from pathlib import Path

#: errno -> what to do about it.
HINTS = {
    errno.ENOSPC: "free disk space and rerun the same command (finished runs are kept, "
    "unfinished ones resume from their checkpoints)",
    errno.EDQUOT: "free space within your disk quota and rerun the same command (finished runs "
    "are kept, unfinished ones resume from their checkpoints)",
    errno.EFBIG: "the file grew past the file system's size limit; use another --out",
    errno.EROFS: "the file system is read-only; give a writable folder with --out",
    errno.EACCES: "no permission; give a writable folder with --out (or fix its permissions)",
    errno.EPERM: "not permitted; give a writable folder with --out (or fix its permissions)",
    errno.EIO: "the disk reported an I/O error; check it, then rerun the same command",
    # Something stands where fedbench writes: a folder in place of a file, a file in place of
    # a folder (--out, OUT/runs, a run folder), or a name the file system cannot hold.
    errno.EISDIR: "a folder stands where fedbench writes a file; remove or rename it",
    errno.ENOTDIR: "a file stands where fedbench needs a folder; remove or rename it, or give "
    "another --out",
    errno.EEXIST: "a file stands where fedbench needs a folder; remove or rename it, or give "
    "another --out",
    errno.ENAMETOOLONG: "the path is too long for the file system; use a shorter --out",
}


def disk_error_line(exc: OSError) -> str | None:
    """The one-line message for a disk fault, or None for any other OSError."""
    if exc.errno not in HINTS:
        return None
    where = exc.filename if exc.filename is not None else "(the file system did not say which file)"
    reason = exc.strerror or os.strerror(exc.errno)
    return f"{reason} ({errno.errorcode[exc.errno]}): {where}; {HINTS[exc.errno]}"


def check_writable(folder: Path) -> None:
    """Create `folder` and a file in it (removed again): raises the OSError of a read-only or
    full disk before work starts that could not save its results (e.g. an SQLite store, whose
    errors do not say which file failed)."""
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / f".write-check.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        with open(probe, "w") as fh:
            fh.write("fedbench\n")
    finally:
        probe.unlink(missing_ok=True)
