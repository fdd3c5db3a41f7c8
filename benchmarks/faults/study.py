"""Study: two tunes of one new study at once, a file-size limit while study.db grows, a
10**8-point grid and 10**9 trials."""

from __future__ import annotations

from benchmarks.faults.context import Context
from benchmarks.faults.harness import at_once, one_clean_line, settled


def case_study(ctx: Context) -> None:
    fb, table = ctx.fb, str(ctx.table_yaml)
    cat = "tune store"
    for i in range(3):  # two tunes of one new study at once
        out = ctx.folder("two-tunes")
        args = ("tune", table, "--grid", "algorithm.lr=0.1", "--rounds", "1", "--out", str(out))
        results = at_once(fb, [args, args], timeout=600)
        problem = next((settled(r) for r in results if settled(r) is not None), None)
        ctx.tally.record(cat, f"two tunes of one new study at once ({i + 1})", problem)
    for kb in (64, 200):
        out = ctx.folder("tune-fsize")
        res = fb(
            "tune",
            table,
            "--grid",
            "algorithm.lr=0.1,0.05",
            "--rounds",
            "1",
            "--out",
            str(out),
            file_kb=kb,
        )
        ctx.tally.record(cat, f"tune with files limited to {kb} kB (a disk filling)", settled(res))
    grid = [f"--grid=algorithm.{k}=" + ",".join(str(i + 1) for i in range(100)) for k in ("lr",)]
    grid += [
        f"--grid=fl.{k}=" + ",".join(str(i + 1) for i in range(100))
        for k in ("local_steps", "batch_size", "rounds")
    ]
    out = ctx.folder("tune-grid")
    res = fb("tune", table, *grid, "--out", str(out), timeout=60)
    ctx.tally.record(cat, "a --grid of 4 fields x 100 values (60 s)", one_clean_line(res))
    res = fb(
        "tune",
        table,
        "--space",
        "algorithm.lr=log:1e-4:1",
        "--trials",
        "1000000000",
        "--out",
        str(out),
        timeout=60,
    )
    ctx.tally.record(cat, "--trials 10**9 (60 s)", one_clean_line(res))
