"""fedbench.report.collect: a planned run without a result that reads back (its folder deleted,
its summary.json gone or unreadable) is `missing`, with its seed named, in every output of the
report; plan.json's record that it completed is not a result."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from fedbench.report import build_report
from fedbench.runner.launcher import Outcome
from fedbench.runner.sweep import write_plan
from fedbench.runner.table_config import Plan, expand, parse_table_config
from tests.conftest import tiny_table_data
from tests.report.helpers import fake_run

ACC = {0: 60.0, 1: 62.0, 2: 70.0, 3: 64.0}


def _swept(tmp_path: Path, seeds: int = 4) -> tuple[Path, Plan]:
    """A finished sweep: FedAdamW and Local SGD in two columns, `seeds` seeds each, every run
    completed (plan.json says so, as a sweep writes it)."""
    data = tiny_table_data()
    data["seeds"] = list(range(seeds))
    data["grid"] = {"partition.alpha": [0.6, 0.1]}
    plan = expand(parse_table_config(data))
    for run in plan.runs:
        fake_run(tmp_path / "runs" / run.run_id, run.cfg, ACC[run.seed])
    folder = tmp_path / plan.name
    write_plan(plan, folder, {r.run_id: Outcome(r.run_id, "completed") for r in plan.runs})
    return folder, plan


def _run_dir(folder: Path, plan: Plan, method: str, alpha: float, seed: int) -> Path:
    (run,) = [
        r
        for r in plan.runs
        if (r.method, r.setting["partition.alpha"], r.seed) == (method, alpha, seed)
    ]
    return folder.parent / "runs" / run.run_id


def _outputs(folder: Path, report) -> dict[str, str]:
    console = Console(width=300, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(report.rich)
    return {
        "table.md": (folder / "table.md").read_text(),
        "table.csv": (folder / "table.csv").read_text(),
        "table.tex": (folder / "table.tex").read_text(),
        "terminal": console.export_text(),
    }


def _cell(report, method: str, alpha: float) -> pd.Series:
    s = report.summary
    rows = s[
        (s["method"] == method) & (s["metric"] == "test_acc") & (s["partition.alpha"] == alpha)
    ]
    return rows.iloc[0]


def test_a_deleted_run_folder_is_missing_with_its_seed_in_every_output(tmp_path: Path, caplog):
    folder, plan = _swept(tmp_path)
    gone = _run_dir(folder, plan, "FedAdamW", 0.1, 2)
    shutil.rmtree(gone)
    with caplog.at_level(logging.WARNING, logger="fedbench"):
        report = build_report(folder)
    cell = _cell(report, "FedAdamW", 0.1)
    assert (cell["n"], cell["missing"]) == (3, 1)  # main: (3, 0), plan.json's "completed"
    assert cell["missing_seeds"] == "2"
    assert cell["mean"] == pytest.approx((60.0 + 62.0 + 64.0) / 3)
    assert cell["cell"] == "62.00 ± 2.00 (seed 2 missing)"
    other = _cell(report, "FedAdamW", 0.6)
    assert (other["n"], other["missing"], other["missing_seeds"]) == (4, 0, "")
    csv = pd.read_csv(folder / "summary.csv", keep_default_na=False)
    row = csv[(csv["method"] == "FedAdamW") & (csv["metric"] == "test_acc")]
    assert list(row["missing"]) == [0, 1] and list(row["missing_seeds"].astype(str)) == ["", "2"]
    header = (
        "4 seeds planned (0-3), 1 of 16 runs missing (left out): FedAdamW in Dir-0.1 seed 2 "
        "(its run folder is gone)"
    )
    assert header in report.view.details
    for name, text in _outputs(folder, report).items():
        assert "seed 2 missing" in text, name
        if name != "table.csv":  # the cells only
            assert header in " ".join(text.split()).replace("\\", ""), name
    assert (
        f"run {gone.name} (FedAdamW, seed 2): its run folder is gone (plan.json records it as "
        "completed); the report counts it as missing"
    ) in caplog.text


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ("garbage", "summary.json is not JSON"),
        ("deleted", "its summary.json is gone"),
        ("no metrics", "its metrics.jsonl is gone"),
    ],
)
def test_a_run_whose_files_do_not_read_back_is_missing(tmp_path: Path, damage: str, why: str):
    folder, plan = _swept(tmp_path)
    run_dir = _run_dir(folder, plan, "Local SGD", 0.6, 0)
    if damage == "garbage":
        (run_dir / "summary.json").write_text("{ half a summ")
    elif damage == "deleted":
        (run_dir / "summary.json").unlink()
    else:
        (run_dir / "metrics.jsonl").unlink()
    report = build_report(folder)  # not a refusal: the other 15 runs are reported
    cell = _cell(report, "Local SGD", 0.6)
    assert (cell["n"], cell["missing"], cell["missing_seeds"]) == (3, 1, "0")
    assert f"Local SGD in Dir-0.6 seed 0 ({why}" in report.view.details


def test_runs_never_run_are_counted_and_a_cell_of_them_says_not_run(tmp_path: Path):
    folder, plan = _swept(tmp_path, seeds=2)
    (folder / "plan.json").unlink()
    write_plan(plan, folder)  # a sweep that has not run yet: every status "planned"
    for seed in (0, 1):
        shutil.rmtree(_run_dir(folder, plan, "Local SGD", 0.1, seed))
    shutil.rmtree(_run_dir(folder, plan, "FedAdamW", 0.1, 1))
    report = build_report(folder)
    assert _cell(report, "Local SGD", 0.1)["cell"] == "not run"
    assert _cell(report, "FedAdamW", 0.1)["cell"] == "60.00 (1 seed, seed 1 missing)"
    assert "2 seeds planned (0, 1), 3 of 8 runs missing (left out): 3 not run yet" in (
        report.view.details
    )


def test_a_cell_whose_every_run_is_gone_names_its_seeds(tmp_path: Path):
    folder, plan = _swept(tmp_path, seeds=2)
    for seed in (0, 1):
        shutil.rmtree(_run_dir(folder, plan, "FedAdamW", 0.6, seed))
    report = build_report(folder)
    assert _cell(report, "FedAdamW", 0.6)["cell"] == "seeds 0, 1 missing"


def test_a_complete_table_says_nothing_of_missing_runs(tmp_path: Path):
    folder, _ = _swept(tmp_path, seeds=2)
    report = build_report(folder)
    assert "2 seeds (0, 1); each run's final" in report.view.details
    assert "missing" not in (folder / "table.md").read_text().split("- cells:")[0]


def _set_threads(run_dir: Path, threads: int, device: str = "cpu") -> None:
    path = run_dir / "summary.json"
    summary = json.loads(path.read_text())
    summary.update(torch_threads=threads, device=device)
    path.write_text(json.dumps(summary))


def test_a_cell_whose_runs_trained_at_two_thread_counts_says_so_in_every_output(
    tmp_path: Path,
):
    """`--workers 1` and `--workers 2` train one run id at 1 and 2 threads, whose numbers differ
    in the last digits (training's sums are split over the threads); a cell mixing them says so."""
    folder, plan = _swept(tmp_path)
    for run in plan.runs:
        _set_threads(folder.parent / "runs" / run.run_id, 1)
    _set_threads(_run_dir(folder, plan, "Local SGD", 0.6, 3), 2)
    report = build_report(folder)
    mixed = _cell(report, "Local SGD", 0.6)
    assert mixed["threads"] == "1/2"
    assert mixed["cell"] == "64.00 ± 4.32 (mixed threads 1/2)"
    assert _cell(report, "Local SGD", 0.1)["threads"] == "1"
    assert _cell(report, "FedAdamW", 0.6)["cell"] == "64.00 ± 4.32"
    csv = pd.read_csv(folder / "summary.csv", keep_default_na=False, dtype=str)
    assert sorted(set(csv["threads"])) == ["1", "1/2"]
    for name, text in _outputs(folder, report).items():
        assert "mixed threads 1/2" in text, name
        if name != "table.csv":  # the cells only
            assert "different torch thread counts" in " ".join(text.split()), name


def test_thread_counts_of_gpu_runs_or_older_summaries_are_not_compared(tmp_path: Path):
    folder, plan = _swept(tmp_path, seeds=2)
    for run in plan.runs:
        _set_threads(folder.parent / "runs" / run.run_id, 1 + run.seed, device="cuda:0")
    report = build_report(folder)
    assert set(report.summary["threads"]) == {""}
    assert "mixed threads" not in (folder / "table.md").read_text()
