"""Concurrency: two identical sweeps into one --out train each run once; two different sweeps
sharing runs never report each other's plan."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.faults.context import Context
from benchmarks.faults.harness import Result, at_once, run_dirs


def case_concurrency(ctx: Context) -> None:
    fb, table = ctx.fb, str(ctx.table_yaml)

    def both(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[Result, Result]:
        ra, rb = at_once(fb, [a, b], timeout=900)
        return ra, rb

    out = ctx.folder("same-sweep")
    args = ("run", table, "--out", str(out), "--workers", "1")
    ra, rb = both(args, args)
    attempts = [json.loads((d / "attempt.json").read_text())["attempts"] for d in run_dirs(out)]
    problem = None
    if ra.code or rb.code:
        problem = f"exit codes {ra.code}, {rb.code}"
    elif attempts != [1] * 4:
        problem = f"attempts per run {attempts}"
    ctx.tally.record(
        "concurrency", "two identical sweeps into one --out train each run once", problem
    )

    out = ctx.folder("two-sweeps")
    a = ("run", table, "--out", str(out), "--seeds", "0,1", "--workers", "1")
    b = ("run", table, "--out", str(out), "--seeds", "1,", "--workers", "1")
    ra, rb = both(a, b)
    problems = []
    for res, seeds in ((ra, {0, 1}), (rb, {1})):
        lines = [x for x in res.out.splitlines() if x.startswith("report: ")]
        if res.code or not lines:
            problems.append(f"exit {res.code}: {res.err.strip()[-150:]}")
            continue
        folder = Path(lines[-1].removeprefix("report: ").strip())
        plan = json.loads((folder / "plan.json").read_text())
        got = {r["seed"] for r in plan["runs"]}
        if got != seeds:
            problems.append(
                f"seeds {sorted(seeds)} printed {folder.name}, which reports {sorted(got)}"
            )
    ctx.tally.record(
        "concurrency",
        "two different sweeps sharing runs: each points at its own report",
        "; ".join(problems) or None,
    )
