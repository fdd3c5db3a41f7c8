"""Bombs: an npz with a label of 10**9 or no samples, image_size=100000, samples_per_client=10**9,
a figure with 10**9 trials (3 GB of memory, 60 s)."""

from __future__ import annotations

from benchmarks.faults.context import Context
from benchmarks.faults.harness import one_clean_line


def case_bombs(ctx: Context) -> None:
    import numpy as np

    run_yaml = str(ctx.run_yaml)
    cat = "bombs"
    arrays = {
        "a label of 10**9": (np.zeros((8, 4), np.float32), np.array([0, 1] * 3 + [1, 10**9])),
        "no training samples": (np.zeros((0, 4), np.float32), np.zeros(0, np.int64)),
    }
    for case, (x, y) in arrays.items():
        path = ctx.work / "bomb.npz"
        np.savez(path, x_train=x, y_train=y, x_test=np.zeros((2, 4), np.float32), y_test=[0, 1])
        out = ctx.folder("bomb")
        sets = ("--set", "data.name=npz", "--set", f"data.path={path}")
        res = ctx.fb("train", run_yaml, *sets, "--out", str(out), memory_gb=3, timeout=60)
        ctx.tally.record(cat, f"npz with {case} (3 GB)", one_clean_line(res))
    for sets in (
        ("data.image_size=100000",),
        ("partition.kind=dirichlet_equal", "partition.samples_per_client=1000000000"),
    ):
        out = ctx.folder("bomb")
        args = [a for s in sets for a in ("--set", s)]
        res = ctx.fb("train", run_yaml, *args, "--out", str(out), memory_gb=3, timeout=60)
        ctx.tally.record(cat, f"--set {' '.join(sets)} (3 GB, 60 s)", one_clean_line(res))
    out = ctx.folder("bomb")
    res = ctx.fb(
        "figure",
        "fedadamom-escape",
        "--set",
        "trials=1000000000",
        "--out",
        str(out),
        memory_gb=3,
        timeout=60,
    )
    ctx.tally.record(
        cat, "figure fedadamom-escape --set trials=10**9 (3 GB, 60 s)", one_clean_line(res)
    )
