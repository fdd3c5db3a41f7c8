"""Litter: stale temporaries and a finished run's leftover checkpoint cleaned by the rerun, a
foreign run folder in a listing, an ENOSPC line naming its path."""

from __future__ import annotations

import shutil

from benchmarks.faults.context import Context, killed_run
from benchmarks.faults.harness import one_clean_line, run_dirs, settled, tmp_files


def case_litter(ctx: Context) -> None:
    fb, run_yaml, table = ctx.fb, str(ctx.run_yaml), str(ctx.table_yaml)
    cat = "litter"
    killed = killed_run(ctx, "litter-killed")
    out = ctx.work / "litter"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(killed, out)
    run = run_dirs(out)[0]
    for name in ("checkpoint.json", "summary.json", "config.yaml"):
        (run / f".{name}.4194999.deadbeef.tmp").write_text("half")
    res = fb("train", run_yaml, "--out", str(out))
    problem = settled(res) or (f"left {tmp_files(out)[0].name}" if tmp_files(out) else None)
    ctx.tally.record(cat, "stale temporaries in a killed run's folder, rerun", problem)

    done = ctx.folder("litter-done")
    fb("train", run_yaml, "--out", str(done))
    run = run_dirs(done)[0]
    shutil.copy(run_dirs(killed)[0] / "checkpoint.pt", run / "checkpoint.pt")
    res = fb("train", run_yaml, "--out", str(done))
    problem = settled(res) or ("checkpoint.pt kept" if (run / "checkpoint.pt").exists() else None)
    ctx.tally.record(cat, "a finished run holding checkpoint.pt (killed before cleanup)", problem)

    rep = ctx.folder("litter-report")
    fb("run", table, "--out", str(rep), "--preset", "quick", "--workers", "1")
    (rep / "tiny-quick" / ".plan.json.4194999.deadbeef.tmp").write_text("half")
    res = fb("run", table, "--out", str(rep), "--preset", "quick", "--workers", "1")
    problem = settled(res) or (f"left {tmp_files(rep)[0].name}" if tmp_files(rep) else None)
    ctx.tally.record(cat, "a stale .plan.json temporary, rerun", problem)

    foreign = ctx.folder("litter-foreign")
    fb("train", run_yaml, "--out", str(foreign))
    (foreign / "runs" / "foreign").mkdir()
    (foreign / "runs" / "foreign" / "config.yaml").write_text("- a list\n")
    res = fb("runs", str(foreign))
    ctx.tally.record(cat, "a foreign runs/ folder whose config is a list: runs", settled(res))

    where = ctx.folder("litter-enospc")
    fault = {"FEDBENCH_FAULT_DIR": str(where), "FEDBENCH_FAULT_BYTES": "3000"}
    res = fb("train", run_yaml, "--out", str(where), fault=fault)
    problem = one_clean_line(res)
    if problem is None and ": a file;" in res.err:
        problem = "the ENOSPC line names no path"
    ctx.tally.record(cat, "an ENOSPC line names the path", problem)
