"""Names: 300-character names, a 120 kB --set value, --out a file or below one, --write-plan a
folder or read-only, compare FOLDER:ROW with ':' in FOLDER."""

from __future__ import annotations

from benchmarks.faults.context import Context
from benchmarks.faults.harness import one_clean_line, settled, table_config, write_yaml


def case_names(ctx: Context) -> None:
    fb, run_yaml, table = ctx.fb, str(ctx.run_yaml), str(ctx.table_yaml)
    cat = "names and paths"
    data = table_config(name="t" * 300, rounds=1)
    data["seeds"] = [0]
    data["methods"] = {"FedAvg": data["methods"]["FedAvg"]}
    long_table = write_yaml(ctx.work / "long-table.yaml", data)
    out = ctx.folder("long-name")
    ctx.tally.record(
        cat,
        "a 300-character table name: run",
        settled(fb("run", str(long_table), "--out", str(out))),
    )
    out = ctx.folder("long-set")
    res = fb(
        "train",
        run_yaml,
        "--set",
        "data.name=npz",
        "--set",
        "data.path=" + "p" * 120_000,
        "--out",
        str(out),
    )
    ctx.tally.record(cat, "a 120 kB --set value: train", settled(res))

    a_file = ctx.work / "a-file"
    a_file.write_text("not a folder\n")
    for target, what in ((a_file, "an existing file"), (a_file / "sub", "below a file")):
        for args in (
            ("train", run_yaml),
            ("run", table, "--preset", "quick"),
            ("figure", "fedadamom-escape", "--preset", "quick"),
        ):
            res = fb(*args, "--out", str(target))
            ctx.tally.record(cat, f"--out {what}: {args[0]}", one_clean_line(res))
    plan_dir = ctx.folder("plan-dir")
    res = fb("run", table, "--dry-run", "--write-plan", str(plan_dir), "--out", str(plan_dir))
    ctx.tally.record(cat, "--write-plan naming a folder", one_clean_line(res))
    ro = ctx.folder("plan-ro")
    fault = {"FEDBENCH_FAULT_DIR": str(ro), "FEDBENCH_FAULT_KIND": "rofs"}
    res = fb("run", table, "--dry-run", "--write-plan", str(ro / "p.json"), fault=fault)
    ctx.tally.record(cat, "--write-plan on a read-only folder", one_clean_line(res))

    colon = ctx.folder("co:lon")
    fb("run", table, "--out", str(colon), "--preset", "quick", "--workers", "1")
    side = f"{colon / 'tiny-quick'}"
    res = fb("compare", f"{side}:FedAvg", f"{side}:FedAdamW")
    problem = settled(res)
    if problem is None and "not a table folder" in res.err:
        problem = "split FOLDER:ROW at the wrong ':'"
    ctx.tally.record(cat, "compare FOLDER:ROW with a ':' in FOLDER", problem)
