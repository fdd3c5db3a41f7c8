"""Which folder a sweep writes its report to, when sweeps share one --out (docs/sweeps.md,
"Two sweeps into one --out").

A sweep reports in OUT/<table>[-<preset>][-tuned]/ and holds that folder (a shared flock on its
`lock` file) until its report is written. A second sweep of the same plan (the same runs, table,
preset, --set and tuned values: the `fingerprint` recorded in plan.json) shares the folder, since
both write the same report. A sweep of another plan that finds the folder held by a running sweep
does not overwrite it: it reports in OUT/<table>[-<preset>]-<fingerprint[:8]>/ instead and says
so. So a "report: FOLDER" line always names a folder that holds that sweep's plan. When no sweep
holds the folder, the next one takes it over, as a rerun always has.

The decision (look, lock, write plan.json) runs under a short exclusive lock on
OUT/.<folder>.claim, so two sweeps starting at once cannot both take the same folder. flock
locks die with their process, SIGKILL included: a killed sweep never leaves a folder claimed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from fedbench.errors import FedbenchError
from fedbench.readback import BadFile, read_plan_file
from fedbench.runner.table_config import Plan

PLAN_FILE = "plan.json"
LOCK_FILE = "lock"


def plan_fingerprint(plan: Plan) -> str:
    """SHA-256 of what a report covers: the table config, preset, --set, tuned values and every
    run (row, column, seed, run id)."""
    covered = {
        "table": plan.table.model_dump(mode="json"),
        "preset": plan.preset,
        "overrides": plan.overrides,
        "tuned": plan.tuned,
        "runs": [[r.method, r.setting, r.seed, r.run_id] for r in plan.runs],
    }
    return hashlib.sha256(json.dumps(covered, sort_keys=True, default=str).encode()).hexdigest()


def _recorded(folder: Path) -> str | None:
    """The fingerprint in folder/plan.json (None if absent or unreadable)."""
    try:
        return read_plan_file(folder / PLAN_FILE).get("fingerprint")
    except (OSError, BadFile):
        return None


@contextmanager
def _exclusive(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _take(folder: Path, fingerprint: str) -> tuple[int, bool] | None:
    """Hold `folder` for this plan: (the lock's fd, whether it was free), or None when a running
    sweep of another plan holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        free = True
    except BlockingIOError:
        free = False
    if not free and _recorded(folder) != fingerprint:
        os.close(fd)
        return None
    # Shared from here on: a sweep of the same plan may join (the claim lock serialises this).
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd, free


@contextmanager
def claim_report_folder(
    folder: Path,
    plan: Plan,
    start: Callable[[Path], None],
    note: Callable[[str], None] | None = None,
) -> Iterator[Path]:
    """Hold the report folder of `plan` (normally `folder`, OUT/<table>[-<preset>]) while the
    sweep runs; `start(claimed)` writes its plan.json under the claim lock; `note` is told when
    another plan's running sweep holds `folder`. Yields the claimed folder."""
    fingerprint = plan_fingerprint(plan)
    folder.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(folder.parent / f".{folder.name}.claim"):
        taken = _take(folder, fingerprint)
        claimed = folder
        if taken is None:
            claimed = folder.with_name(f"{folder.name}-{fingerprint[:8]}")
            taken = _take(claimed, fingerprint)
            if taken is None:  # two different plans with one fingerprint prefix: not expected
                raise FedbenchError(
                    f"{folder} and {claimed} are held by running sweeps of other plans; "
                    "wait for them or use another --out"
                )
            if note is not None:
                note(
                    f"note: {folder} holds the report of another plan of {plan.table.table} "
                    f"that a running sweep is writing; this sweep reports in {claimed}"
                )
        fd, _ = taken
        try:
            start(claimed)
        except BaseException:
            os.close(fd)
            raise
    try:
        yield claimed
    finally:
        os.close(fd)
