"""Kills: SIGKILLs of a whole sweep at seeded random moments, then a rerun to completion; the
report must be byte-identical to an undisturbed sweep's."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import time

from benchmarks.faults.context import Context
from benchmarks.faults.harness import REPORT_FILES, report_bytes


def case_kills(ctx: Context) -> None:
    """SIGKILL a whole two-worker sweep at random moments, rerun it to the end: same report."""
    fb, table = ctx.fb, str(ctx.table_yaml)
    ref = ctx.folder("kills-ref")
    fb("run", table, "--out", str(ref), "--workers", "2")  # threads per run change the floats
    expected = report_bytes(ref / "tiny")
    out = ctx.folder("kills")
    rng = random.Random(0)
    for i in range(ctx.kills):
        proc = subprocess.Popen(
            fb.command("run", table, "--out", str(out), "--workers", "2"),
            env=fb.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        time.sleep(rng.uniform(1.0, 6.0))
        finished = proc.poll() is not None
        if not finished:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        res = fb("run", table, "--out", str(out), "--workers", "2")
        got = report_bytes(out / "tiny")
        problem = None
        if res.code != 0:
            problem = f"the rerun exited {res.code}: {res.err.strip()[-200:]}"
        elif got != expected or len(got) != len(REPORT_FILES):
            problem = "report differs from an undisturbed sweep's"
        ctx.tally.record(
            "kills", f"kill {i + 1}" + (" (sweep had ended)" if finished else ""), problem
        )
        shutil.rmtree(out / "runs")  # the next kill starts from scratch
