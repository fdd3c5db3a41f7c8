from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from fedbench.errors import FedbenchError
from fedbench.report import build_report
from fedbench.report.collect import statistic
from fedbench.report.paper import load_paper_table, paper_value
from fedbench.runner.sweep import write_plan
from fedbench.runner.table_config import PaperRef, expand, parse_table_config
from tests.conftest import tiny_table_data
from tests.report.helpers import fake_run

ACC = {("Local SGD", 0): 50.0, ("Local SGD", 1): 54.0, ("Local SGD", 2): 61.0}
ACC.update({("FedAdamW", 0): 70.0, ("FedAdamW", 1): 71.5, ("FedAdamW", 2): 80.0})


@pytest.fixture
def table_folder(tmp_path: Path) -> Path:
    data = tiny_table_data()
    data["seeds"] = [0, 1, 2, 3]
    data["grid"] = {"model.name": ["resnet18"], "partition.alpha": [0.6, 0.1]}
    data["presets"] = {"quick": {"model.name": {"resnet18": "logreg"}}}
    plan = expand(parse_table_config(data), preset="quick")
    for run in plan.runs:
        bump = 0.0 if run.setting["partition.alpha"] == 0.6 else -5.0
        if run.seed == 3:  # seed 3 failed (Local SGD) or diverged (FedAdamW): not in the mean
            status = "failed" if run.method == "Local SGD" else "diverged"
            fake_run(tmp_path / "runs" / run.run_id, run.cfg, 99.0, status)
        else:
            fake_run(tmp_path / "runs" / run.run_id, run.cfg, ACC[run.method, run.seed] + bump)
    folder = tmp_path / plan.name
    write_plan(plan, folder)
    return folder


def test_report_recomputes_mean_and_sample_std(table_folder: Path):
    report = build_report(table_folder)
    s = report.summary
    row = s[
        (s["method"] == "FedAdamW") & (s["metric"] == "test_acc") & (s["partition.alpha"] == 0.6)
    ]
    row = row.iloc[0]
    values = [70.0, 71.5, 80.0]
    assert row["n"] == 3
    assert row["mean"] == pytest.approx(statistics.mean(values))
    assert row["std"] == pytest.approx(statistics.stdev(values))  # ddof 1
    assert row["diverged"] == 1
    # the paper's FedAdamW, ResNet-18, Dir-0.6 test accuracy sits beside ours
    assert (row["paper_mean"], row["paper_std"]) == (66.12, 0.10)
    low = s[
        (s["method"] == "Local SGD") & (s["metric"] == "test_acc") & (s["partition.alpha"] == 0.1)
    ]
    assert low.iloc[0]["mean"] == pytest.approx(statistics.mean([45.0, 49.0, 56.0]))
    assert low.iloc[0]["failed"] == 1
    assert low.iloc[0]["paper_mean"] == 60.25  # "Local SGD" maps to FedAvg

    csv = pd.read_csv(table_folder / "summary.csv")
    for col in (
        "method",
        "model.name",
        "partition.alpha",
        "metric",
        "mean",
        "std",
        "n",
        "paper_mean_at_paper_setting",  # the preset trains a logreg, not the paper's ResNet-18
        "paper_std_at_paper_setting",
    ):
        assert col in csv.columns
    assert set(csv["model.name"]) == {"logreg"} and set(csv["paper_model.name"]) == {"resnet18"}
    md = (table_folder / "table.md").read_text()
    assert "73.83 ± 5.39 (1 diverged)" in md  # mean/std of 70, 71.5, 80
    assert "**73.83 ± 5.39 (1 diverged)**" in md  # best in the column
    assert "66.12 ± 0.10" in md
    # comm is deterministic: no "± 0.00"; every row shows 1.00: a tie of every row, no bold
    assert "| 1.00 |" in md and "± 0.00" not in md and "**1.00" not in md
    assert "1 failed" in md
    tex = (table_folder / "table.tex").read_text()
    assert r"\toprule" in tex and r"\textbf{73.83 $\pm$ 5.39" in tex
    wide = pd.read_csv(table_folder / "table.csv")
    assert list(wide["method"]) == ["Local SGD", "FedAdamW"]
    assert (table_folder / "curves.png").stat().st_size > 10_000


def test_all_failed_cell_says_so(table_folder: Path):
    for run_dir in (table_folder.parent / "runs").iterdir():
        summary = json.loads((run_dir / "summary.json").read_text())
        summary["status"] = "diverged"
        (run_dir / "summary.json").write_text(json.dumps(summary))
    report = build_report(table_folder)
    assert set(report.summary[report.summary["metric"] == "test_acc"]["cell"]) == {"diverged"}


def test_statistic_final_best_last_k():
    rows = [{"test_acc": a, "train_loss": b} for a, b in [(10, 3.0), (30, 1.0), (20, 2.0)]]
    assert statistic(rows, "test_acc", "final", 2) == 20
    assert statistic(rows, "test_acc", "best", 2) == 30
    assert statistic(rows, "train_loss", "best", 2) == 1.0
    assert statistic(rows, "test_acc", "last_k_mean", 2) == 25
    assert math.isnan(statistic([], "test_acc", "final", 2))


def test_paper_tables_ship_with_the_package():
    df = load_paper_table("fedadamw_table1")
    assert len(df) == 72
    ref = PaperRef(table="fedadamw_table1")
    setting = {"model.name": "vit_tiny", "partition.alpha": 0.1}
    assert paper_value(ref, "FedAdamW", setting, "test_acc") == (39.86, 0.16)
    assert paper_value(ref, "FedAdamW", setting, "comm")[0] == 1
    alpha = PaperRef(table="fedadamw_table5")
    assert paper_value(alpha, "FedAdamW", {"algorithm.alpha": 0.25}, "test_acc")[0] == 37.93
    rows = PaperRef(
        table="fedadamw_table11", rows={"FedAdamW (blocks: tensor)": "FedAdamW (Algorithm 2)"}
    )
    assert paper_value(rows, "FedAdamW (blocks: tensor)", setting, "train_loss")[0] == 1.251
    with pytest.raises(FedbenchError, match="no paper table"):
        load_paper_table("nope")


def test_dataset_columns_map_to_the_papers_dataset_and_glue_task():
    swin = PaperRef(table="fedadamw_table2")
    assert paper_value(swin, "FedAdamW", {"data.name": "cifar100"}, "test_acc") == (85.85, 0.08)
    assert paper_value(swin, "FedAdamW", {"data.name": "tinyimagenet"}, "test_acc")[0] == 85.23
    glue = PaperRef(table="fedadamw_table3")
    assert paper_value(glue, "FedAdamW", {"data.name": "glue/cola"}, "test_acc") == (58.21, 0.15)
    assert not math.isnan(paper_value(glue, "FedAdamW", {"data.name": "glue/sst2"}, "test_acc")[0])
    dp = PaperRef(table="dp_fedadamw_table2", where={"model": "ResNet-18"})
    cell = {"data.name": "cifar100", "partition.alpha": 0.1}
    assert paper_value(dp, "DP-FedAdamW", cell, "test_acc") == (33.55, 0.50)


def test_report_of_a_non_table_folder_is_a_one_line_error(tmp_path: Path):
    with pytest.raises(FedbenchError, match="not a table folder"):
        build_report(tmp_path)


def test_table_note_is_printed_under_the_table(tmp_path: Path):
    data = tiny_table_data()
    data["note"] = "Our DP numbers are expected to be lower than the paper's."
    plan = expand(parse_table_config(data), seeds=1)
    for run in plan.runs:
        fake_run(tmp_path / "runs" / run.run_id, run.cfg, 50.0)
    write_plan(plan, tmp_path / plan.name)
    report = build_report(tmp_path / plan.name)
    md = (tmp_path / plan.name / "table.md").read_text()
    ours = md.split("## paper")[0]
    assert f"\n\n{data['note']}\n" in ours  # under our table and its legend, before the paper's
    console = Console(width=200, record=True)
    console.print(report.rich)
    terminal = console.export_text()
    assert data["note"] in terminal
    assert (
        terminal.index("cells: the value of 1 seed")
        < terminal.index(data["note"])
        < terminal.index("paper (")
    )


def test_rounds_to_target_counts_unreached_runs_and_never_averages_them(table_folder: Path):
    # Local SGD reaches the target in rounds 2 and 1 (seeds 0, 1); seed 2 never does.
    reached = {("Local SGD", 0): 2, ("Local SGD", 1): 1, ("Local SGD", 2): None}
    plan = json.loads((table_folder / "plan.json").read_text())
    plan["table"]["metrics"] = ["test_acc", "best_test_acc", "rounds_to_target"]
    (table_folder / "plan.json").write_text(json.dumps(plan))
    for run in plan["runs"]:
        path = table_folder.parent / "runs" / run["run_id"] / "summary.json"
        summary = json.loads(path.read_text())
        summary["rounds"] = 2
        summary["best"] = {"round": 2, "test_acc": 77.0 + run["seed"]}
        summary["rounds_to_target"] = reached.get((run["method"], run["seed"]))
        path.write_text(json.dumps(summary))
    s = build_report(table_folder).summary
    cells = s[(s["metric"] == "rounds_to_target") & (s["partition.alpha"] == 0.6)]
    local = cells[cells["method"] == "Local SGD"].iloc[0]
    assert local["n"] == 2 and local["mean"] == 1.5 and local["not_reached"] == 1
    assert local["cell"].startswith("2 ± 1 (1 of 3 not reached in 2 rounds")
    never = cells[cells["method"] == "FedAdamW"].iloc[0]
    assert never["cell"] == "not reached in 2 rounds (3 runs)" and math.isnan(never["mean"])
    best = s[(s["metric"] == "best_test_acc") & (s["method"] == "FedAdamW")].iloc[0]
    assert best["mean"] == pytest.approx(78.0)  # seeds 0-2: 77, 78, 79


def test_diagnostic_metrics_are_the_mean_over_measured_rounds_and_rank_nothing(
    table_folder: Path, run_cli
):
    # eval.diagnostics rows: local_step_ratio measured at rounds 1 and 2 (round 0 has none).
    measured = {}
    for run_dir in (table_folder.parent / "runs").iterdir():
        lines = (run_dir / "metrics.jsonl").read_text().splitlines()
        rows = [json.loads(line) for line in lines]
        seed = int(json.loads((run_dir / "summary.json").read_text()).get("seed", 0))
        for r in rows[1:]:
            r["local_step_ratio"] = 0.5 + 0.1 * r["round"] + 0.01 * seed + 0.001 * len(run_dir.name)
        measured[run_dir.name] = (rows[1]["local_step_ratio"] + rows[2]["local_step_ratio"]) / 2
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, out, err = run_cli(
        "report", str(table_folder), "--metric", "local_step_ratio", "--metric", "client_drift"
    )
    assert code == 0, err
    assert "step RMS / lr" in out
    s = pd.read_csv(table_folder / "summary.csv")
    plan = json.loads((table_folder / "plan.json").read_text())
    ratio = s[s["metric"] == "local_step_ratio"]
    for _, row in ratio.iterrows():
        runs = [
            r["run_id"]
            for r in plan["runs"]
            if r["method"] == row["method"]
            and r["setting"]["partition.alpha"] == row["partition.alpha"]
            and r["seed"] != 3  # seed 3 failed or diverged: not in the mean
        ]
        assert row["n"] == 3
        assert row["mean"] == pytest.approx(statistics.mean(measured[r] for r in runs), abs=1e-12)
    # A measurement, not a score: no bold, no Welch test against a best row.
    assert not ratio["best"].any() and ratio["p_vs_best"].isna().all()
    # client_drift was not measured by any run: the metric is there, with no values.
    assert (s[s["metric"] == "client_drift"]["n"] == 0).all()
    assert "step RMS / lr" in (table_folder / "table.md").read_text()
    code, _, err = run_cli("report", str(table_folder), "--metric", "local_step_ration")
    assert (
        code == 2
        and "did you mean 'local_step_ratio'" in err
        and len(err.strip().splitlines()) == 1
    )


def test_three_seeds_with_every_row_equal_say_why_nothing_is_marked(tmp_path: Path):
    data = tiny_table_data()
    data["seeds"] = [0, 1, 2]
    data["metrics"] = ["test_acc"]
    plan = expand(parse_table_config(data))
    for run in plan.runs:  # both rows give the same per-seed values
        fake_run(tmp_path / "runs" / run.run_id, run.cfg, 60.0 + run.seed)
    write_plan(plan, tmp_path / plan.name)
    md = build_report(tmp_path / plan.name).files[2].read_text()
    assert "no column has a single best row to test against" in md
    assert "needs >= 3 seeds" not in md and "≈" not in md


def test_latex_cells_are_escaped_then_marked_like_every_format() -> None:
    from fedbench.report.tables import Cell, _tex_cell

    assert _tex_cell(Cell("73.8 ± 5%", best=True)) == r"\textbf{73.8 $\pm$ 5\%}"
    assert _tex_cell(Cell("70.1_a", tie=True)) == r"70.1\_a$^{\approx}$"
    assert _tex_cell(Cell("69.0", best=True, tie=True)) == r"\textbf{69.0}"
    assert _tex_cell(Cell("68.0", tie=False)) == "68.0"
    assert _tex_cell(None) == ""


def test_a_pipe_in_a_row_label_stays_in_its_markdown_cell(tmp_path: Path):
    data = tiny_table_data()
    data["methods"]["FedAdamW | alpha 0.5"] = data["methods"].pop("FedAdamW")
    plan = expand(parse_table_config(data), seeds=1)
    for run in plan.runs:
        fake_run(tmp_path / "runs" / run.run_id, run.cfg, 50.0)
    write_plan(plan, tmp_path / plan.name)
    build_report(tmp_path / plan.name)
    md = (tmp_path / plan.name / "table.md").read_text().splitlines()
    header = next(line for line in md if line.startswith("| method"))
    row = next(line for line in md if line.startswith("| FedAdamW"))
    assert row.startswith("| FedAdamW \\| alpha 0.5 | ")
    cells = [c for c in re.split(r"(?<!\\)\|", row)]
    assert len(cells) == len(header.split("|"))  # one cell per column, not a split row
