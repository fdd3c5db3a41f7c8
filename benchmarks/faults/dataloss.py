"""Data loss: kills and full disks while model.pt, a report or tuned.yaml is written, two tables
whose names sanitise alike, a sweep under an ASCII locale; the previous complete file survives."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.faults.context import Context, driver
from benchmarks.faults.harness import (
    REPORT_FILES,
    one_clean_line,
    readable_model,
    report_bytes,
    run_dirs,
    settled,
    table_config,
    tmp_files,
    write_yaml,
)

KILL_IN_MODEL_PT = """
import io, os, signal, torch
_real = torch.save
def _save(obj, f, *a, **k):
    name = str(getattr(f, "name", f))
    if "model.pt" in name:
        buf = io.BytesIO(); _real(obj, buf, *a, **k); data = buf.getvalue()
        if hasattr(f, "write"):
            f.write(data[: len(data) // 2]); f.flush()
        else:
            open(f, "wb").write(data[: len(data) // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    return _real(obj, f, *a, **k)
torch.save = _save
"""


def case_data_loss(ctx: Context) -> None:  # noqa: C901 (one block per way to lose data)
    fb, run_yaml, table = ctx.fb, str(ctx.run_yaml), str(ctx.table_yaml)
    cat = "data loss"

    # model.pt: killed while written, then rerun with --save-model.
    out = ctx.folder("model-kill")
    driver(ctx, KILL_IN_MODEL_PT, ["train", run_yaml, "--out", str(out), "--save-model"])
    res = fb("train", run_yaml, "--out", str(out), "--save-model")
    runs = run_dirs(out)
    problem = settled(res)
    if problem is None and not (runs and readable_model(runs[0] / "model.pt")):
        problem = "LOST: model.pt unreadable after the rerun"
    ctx.tally.record(cat, "train --save-model killed while writing model.pt, rerun", problem)

    # model.pt on a full disk, then the rerun with space.
    out = ctx.folder("model-full")
    fault = {"FEDBENCH_FAULT_DIR": str(out), "FEDBENCH_FAULT_MATCH": "model.pt"}
    first = fb("train", run_yaml, "--out", str(out), "--save-model", fault=fault)
    res = fb("train", run_yaml, "--out", str(out), "--save-model")
    runs = run_dirs(out)
    problem = one_clean_line(first) or settled(res)
    if problem is None and not (runs and readable_model(runs[0] / "model.pt")):
        problem = "LOST: model.pt unreadable after the rerun"
    ctx.tally.record(cat, "disk full while writing model.pt, rerun with space", problem)

    # A complete report, then `report` on a full disk: the previous report must survive.
    out = ctx.folder("report-full")
    fb("run", table, "--out", str(out), "--preset", "quick", "--workers", "1")
    folder = out / "tiny-quick"
    before = report_bytes(folder)
    for budget in ("0", "300"):
        fault = {"FEDBENCH_FAULT_DIR": str(folder), "FEDBENCH_FAULT_BYTES": budget}
        res = fb("report", str(folder), fault=fault)
        problem = settled(res)
        if report_bytes(folder) != before:
            problem = "LOST: the previous report was changed or destroyed"
        elif problem is None and (left := tmp_files(folder)):
            problem = f"left {left[0].name}"
        ctx.tally.record(cat, f"report on a disk with {budget} bytes free", problem)

    # tuned.yaml rewritten on a full disk.
    out = ctx.folder("tuned-full")
    tune_args = ("tune", table, "--grid", "algorithm.lr=0.1", "--rounds", "1", "--out", str(out))
    fb(*tune_args)
    tuned = out / "tiny-tune" / "tuned.yaml"
    if tuned.is_file():
        before_tuned = tuned.read_bytes()
        fault = {"FEDBENCH_FAULT_DIR": str(out / "tiny-tune"), "FEDBENCH_FAULT_MATCH": "tuned.yaml"}
        res = fb(*tune_args, fault=fault)
        problem = settled(res)
        if tuned.read_bytes() != before_tuned:
            problem = "LOST: tuned.yaml was changed or destroyed"
    else:
        problem = "the first tune wrote no tuned.yaml"
    ctx.tally.record(cat, "tune rewriting tuned.yaml on a full disk", problem)

    # Two tables whose names are one folder once sanitised, into one --out.
    out = ctx.folder("alpha-beta")
    folders = []
    for name in ("α", "β"):
        data = table_config(name=name, rounds=1)
        data["seeds"] = [0]
        path = write_yaml(ctx.work / f"table-{name}.yaml", data)
        res = fb("run", str(path), "--out", str(out), "--workers", "1")
        lines = [x for x in res.out.splitlines() if x.startswith("report: ")]
        folders.append((name, res, Path(lines[-1][8:].strip()) if lines else None))
    problem = None
    for name, res, folder in folders:
        problem = problem or settled(res)
        if problem is None and folder is not None:
            plan = json.loads((folder / "plan.json").read_text())
            if plan["table"]["table"] != name:
                problem = f"LOST: {name}'s report folder holds table {plan['table']['table']}"
    if problem is None and folders[0][2] == folders[1][2]:
        problem = "LOST: two tables reported into one folder"
    ctx.tally.record(cat, "tables α and β into one --out", problem)

    # A sweep under a non-UTF-8 locale writes every report file.
    out = ctx.folder("c-locale")
    res = fb(
        "run",
        table,
        "--out",
        str(out),
        "--preset",
        "quick",
        "--workers",
        "1",
        extra_env={"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""},
    )
    problem = settled(res)
    missing = [n for n in (*REPORT_FILES, "curves.png") if not (out / "tiny-quick" / n).is_file()]
    if problem is None and missing:
        problem = f"LOST: no {', '.join(missing)}"
    ctx.tally.record(cat, "a sweep under LC_ALL=C PYTHONUTF8=0", problem)
