"""Disk faults: read-only and full disks (simulated by benchmarks.faults.inject); one clean line, no
temporary left, and a run that resumes to the undisturbed result."""

from __future__ import annotations

import json

from benchmarks.faults.context import Context, check_clean
from benchmarks.faults.harness import tmp_files


def case_disk_faults(ctx: Context) -> None:
    fb, run_yaml, table = ctx.fb, str(ctx.run_yaml), str(ctx.table_yaml)
    w = ctx.work
    # Read-only --out: new and existing folders.
    for command in ("train", "run", "tune"):
        for existing in (False, True):
            where = ctx.folder(f"ro-{command}")
            target = where / "out"
            if existing:  # a folder with a finished earlier run of another config
                fb("train", run_yaml, "--set", "fl.rounds=1", "--out", str(target))
            args = {
                "train": ("train", run_yaml),
                "run": ("run", table, "--workers", "1"),
                "tune": ("tune", table, "--grid", "algorithm.lr=0.1", "--rounds", "1"),
            }[command]
            fault = {"FEDBENCH_FAULT_DIR": str(where), "FEDBENCH_FAULT_KIND": "rofs"}
            check_clean(
                ctx,
                f"read-only --out, {'existing' if existing else 'new'} folder: {command}",
                (*args, "--out", str(target)),
                fault=fault,
            )

    # Disk full: train with a little space left, then the rerun (space freed) must resume.
    for budget, what in (("0", "no space at all"), ("3000", "3 kB free"), ("40000", "40 kB free")):
        where = ctx.folder("full-train")
        fault = {"FEDBENCH_FAULT_DIR": str(where), "FEDBENCH_FAULT_BYTES": budget}
        check_clean(
            ctx,
            f"disk full during train ({what})",
            ("train", run_yaml, "--out", str(where)),
            out=where,
            fault=fault,
        )
        res = fb("train", run_yaml, "--out", str(where))
        problem = f"exit {res.code}: {res.err.strip()[-200:]}" if res.code else None
        ctx.tally.record(
            "I/O faults",
            f"train resumes after disk full ({what})",
            problem or ctx.matches_reference(where),
        )
    where = ctx.folder("full-ckpt")
    fault = {
        "FEDBENCH_FAULT_DIR": str(where),
        "FEDBENCH_FAULT_BYTES": "100000000",
        "FEDBENCH_FAULT_MATCH": "checkpoint.pt",  # its temporary: .checkpoint.pt.<pid>.<hex>.tmp
    }
    budget_fault = {**fault, "FEDBENCH_FAULT_BYTES": "0"}
    check_clean(
        ctx,
        "disk full at the first checkpoint (train)",
        ("train", run_yaml, "--out", str(where)),
        out=where,
        fault=budget_fault,
    )

    # A sweep with one run hitting a full disk: the others finish and the report is written.
    where = ctx.folder("full-sweep")
    plan = w / "plan.json"
    fb("run", table, "--dry-run", "--write-plan", str(plan), "--out", str(where))
    victim = json.loads(plan.read_text())["runs"][1]["run_id"]
    fault = {
        "FEDBENCH_FAULT_DIR": str(where / "runs" / victim),
        "FEDBENCH_FAULT_BYTES": "0",
        "FEDBENCH_FAULT_MATCH": "checkpoint.pt",
    }
    res = fb("run", table, "--out", str(where), "--workers", "1", fault=fault)
    problems = []
    if "Traceback" in res.err + res.out:
        problems.append("traceback")
    if res.code != 1:
        problems.append(f"exit {res.code} (1: a run failed)")
    if not (where / "tiny" / "summary.csv").is_file():
        problems.append("no report")
    if left := tmp_files(where):
        problems.append(f"left {len(left)} temp file(s): {left[0].name}")
    ctx.tally.record(
        "I/O faults",
        "sweep with one run on a full disk writes its report",
        "; ".join(problems) or None,
    )
    res = fb("run", table, "--out", str(where), "--workers", "1")
    ctx.tally.record(
        "I/O faults",
        "that sweep rerun (space freed) completes",
        None if res.code == 0 else f"exit {res.code}: {res.err.strip()[-200:]}",
    )
