"""Reports state what ran (from the resolved run configs), keep the paper's numbers apart with a
caveat when the setting differs, bold by the value shown, mark ties by a t-test over seeds, and write
a table.tex that compiles."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fedbench.errors import FedbenchError
from fedbench.report import build_report
from fedbench.report.significance import tie_with_best, welch_p
from fedbench.report.tables import tex_escape
from fedbench.runner.sweep import write_plan
from fedbench.runner.table_config import expand, parse_table_config
from tests.conftest import tiny_table_data
from tests.report.helpers import fake_run


def paper_like_table() -> dict:
    """A table whose own setting is the paper's (CIFAR-100, ResNet-18, 100 clients, 300 rounds)
    and whose `quick` preset runs digits with a logreg in the resnet18 column."""
    data = tiny_table_data()
    data["base"]["data"] = {"name": "cifar100", "download": False}
    data["base"]["model"] = {"name": "resnet18"}
    data["base"]["partition"]["clients"] = 100
    data["base"]["fl"] = {"rounds": 300, "participation": 0.1, "local_steps": 50, "batch_size": 50}
    data["grid"] = {"model.name": ["resnet18"], "partition.alpha": [0.6, 0.1]}
    data["seeds"] = [0, 1, 2]
    data["presets"] = {
        "quick": {
            "data.name": "digits",
            "model.name": {"resnet18": "logreg"},
            "partition.clients": 5,
            "fl.rounds": 3,
            "fl.participation": 0.4,
            "fl.local_steps": 2,
            "fl.batch_size": 16,
        }
    }
    return data


def write_table(tmp_path: Path, data: dict, acc, **expand_args) -> Path:
    """Fake runs with final accuracy acc(method, setting, seed); returns the table folder."""
    plan = expand(parse_table_config(data), **expand_args)
    for run in plan.runs:
        if not (tmp_path / "runs" / run.run_id).exists():  # two columns may share a run
            fake_run(
                tmp_path / "runs" / run.run_id, run.cfg, acc(run.method, run.setting, run.seed)
            )
    folder = tmp_path / plan.name
    write_plan(plan, folder)
    return folder


def spread(method: str, setting: dict, seed: int) -> float:
    return {"Local SGD": 60.0, "FedAdamW": 80.0}[method] + seed


def test_quick_preset_report_states_what_ran_and_keeps_the_paper_apart(tmp_path: Path):
    folder = write_table(
        tmp_path, paper_like_table(), spread, preset="quick", overrides=["algorithm.lr=0.05"]
    )
    report = build_report(folder)
    md = (folder / "table.md").read_text()
    head, paper = md.split("## paper (CIFAR-100, ResNet-18)")
    # what ran, from the run configs: never the paper's labels
    # the table's title, always; the preset named and the setting said not to be the paper's
    assert head.startswith("# tiny test table, preset quick (not the paper's setting: see what")
    assert (
        "**What ran:** digits, model LogReg; 5 clients (dirichlet, alpha 0.6 or 0.1 (per "
        "column)), 40% (2 per round) participation; 3 rounds, K=2 local steps, B=16; also "
        "algorithm.lr=0.05, eval.train_subset=200." in head
    )
    assert (
        "preset quick; 3 seeds (0-2); each run's final evaluation; --set: algorithm.lr=0.05" in head
    )
    assert "| LogReg / Dir-0.6: acc (%) |" in head and "ResNet" not in head and "CIFAR" not in head
    assert "61.00 ± 1.00" in head and "81.00 ± 1.00" in head
    assert "66.12" not in head  # the paper's FedAdamW, ResNet-18, Dir-0.6: only in its block
    # the paper's block: its own headers, its numbers, a one-line caveat naming the differences
    assert "| ResNet-18 / Dir-0.6: acc (%) |" in paper and "66.12 ± 0.10" in paper
    caveat = [line for line in paper.splitlines() if line.startswith("> ")]
    assert len(caveat) == 1 and "not comparable with the table above" in caveat[0]
    assert (
        "differs in dataset, model, clients, participation, rounds, K, B, algorithm.lr"
        in (caveat[0])
    )
    assert "(CIFAR-100, model ResNet-18; 100 clients" in caveat[0]
    # the terminal: the same sentence, a legend, the paper block
    assert report.view.ran.startswith("digits, model LogReg; 5 clients")
    # Rows a constant apart at every seed: exact comparisons, no test to correct.
    assert any("exact comparisons: every seed gives" in line for line in report.view.legend())
    wide = report.table
    assert "digits / LogReg / Dir-0.1: acc (%)" in wide.columns
    assert "paper at paper setting CIFAR-100 / ResNet-18 / Dir-0.1: acc (%)" in wide.columns
    # table.tex leaves the paper out unless asked; the caption says what ran
    tex = (folder / "table.tex").read_text()
    assert "66.12" not in tex and r"\multicolumn{2}{c}{LogReg / Dir-0.6}" in tex
    assert r"-{}-set: algorithm.lr=0.05" in tex and r"40\% (2 per round)" in tex
    build_report(folder, paper_numbers=True)
    tex = (folder / "table.tex").read_text()
    assert r"\textit{paper (CIFAR-100, ResNet-18)}" in tex and "66.12 $\\pm$ 0.10" in tex
    assert r"\multicolumn{2}{c}{ResNet-18 / Dir-0.6}" in tex and "not comparable" in tex


def test_the_papers_own_setting_has_no_caveat_and_keeps_the_title(tmp_path: Path):
    folder = write_table(tmp_path, paper_like_table(), spread)
    report = build_report(folder)
    assert report.view.title == "tiny test table"
    assert report.view.paper_caveat == ""
    assert report.view.ran.startswith("CIFAR-100, model ResNet-18; 100 clients")
    assert "## paper (CIFAR-100, ResNet-18)" in (folder / "table.md").read_text()


def test_bold_by_the_rounded_value_shown_and_no_std_for_constant_cells(tmp_path: Path):
    data = tiny_table_data()
    data["methods"]["Twin"] = {"algorithm": {"name": "fedavg", "lr": 0.05}}
    data["metrics"] = ["test_acc", "comm"]
    values = {"Local SGD": 92.781, "Twin": 92.779, "FedAdamW": 92.5}  # shown 92.78, 92.78, 92.50
    folder = write_table(tmp_path, data, lambda m, s, seed: values[m])
    build_report(folder)
    md = (folder / "table.md").read_text()
    assert "| Local SGD | **92.78** | 1.00 |" in md  # every seed equal: no "± 0.00"
    assert "| Twin | **92.78** | 1.00 |" in md  # the same number shown: the same bold
    assert "| FedAdamW | 92.50 | 2.00 |" not in md and "| FedAdamW | 92.50 |" in md
    assert "± 0.00" not in md
    tex = (folder / "table.tex").read_text()
    assert tex.count(r"\textbf{92.78}") == 2


def test_ties_with_the_best_are_marked_from_three_seeds(tmp_path: Path):
    data = tiny_table_data()
    data["methods"]["Close"] = {"algorithm": {"name": "fedavg", "lr": 0.05}}
    data["seeds"] = [0, 1, 2]
    data["metrics"] = ["test_acc"]
    acc = {
        "FedAdamW": [90.0, 91.0, 92.0],
        "Close": [89.0, 91.5, 90.5],  # within noise of the best
        "Local SGD": [50.0, 51.0, 52.5],  # far below
    }
    folder = write_table(tmp_path, data, lambda m, s, seed: acc[m][seed])
    report = build_report(folder)
    s = report.summary.set_index("method")
    assert dict(s["tie"]) == {"Local SGD": False, "FedAdamW": None, "Close": True}
    assert dict(s["best"]) == {"Local SGD": False, "FedAdamW": True, "Close": False}
    assert math.isnan(s.loc["FedAdamW", "p_vs_best"])
    # The rows ran the same seeds: paired t-tests, Holm-corrected over the report's two tests.
    assert dict(s["test"]) == {"Local SGD": "paired", "FedAdamW": "", "Close": "paired"}
    p_close = stats.ttest_rel(acc["FedAdamW"], acc["Close"]).pvalue
    p_far = stats.ttest_rel(acc["FedAdamW"], acc["Local SGD"]).pvalue
    assert s.loc["Close", "p_vs_best"] == pytest.approx(p_close, rel=1e-12)
    assert s.loc["Close", "p_holm"] == pytest.approx(min(1.0, max(p_close, 2 * p_far)), rel=1e-12)
    assert s.loc["Local SGD", "p_holm"] == pytest.approx(2 * p_far, rel=1e-12)
    assert s.loc["Local SGD", "p_holm"] < 0.05 <= s.loc["Close", "p_holm"]
    low, high = stats.t.interval(0.95, 2, loc=np.mean(acc["Close"]), scale=stats.sem(acc["Close"]))
    assert (s.loc["Close", "ci95_low"], s.loc["Close", "ci95_high"]) == pytest.approx(
        (low, high), rel=1e-12
    )
    long = pd.read_csv(folder / "summary.csv")
    assert {"ci95_low", "ci95_high", "test", "p_vs_best", "p_holm"} <= set(long.columns)
    md = (folder / "table.md").read_text()
    assert "| FedAdamW | **91.00 ± 1.00** |" in md
    assert "| Close | 90.33 ± 1.26 ≈ |" in md
    assert "| Local SGD | 51.17 ± 1.26 |" in md
    assert (
        "≈: within noise of the column's best row (paired t-test over seeds (2 tests); "
        "Holm-corrected over the 2 tests of this report; two-sided p >= 0.05)" in md
    )
    # two seeds: nothing is tested, and the legend says why
    data["seeds"] = [0, 1]
    folder = write_table(tmp_path / "two", data, lambda m, s, seed: acc[m][seed])
    build_report(folder)
    md = (folder / "table.md").read_text()
    assert "≈ |" not in md and "needs >= 3 seeds per cell" in md


def test_welch_p_matches_the_formula_in_float64():
    a, b = [90.0, 91.0, 92.0, 94.0], [89.0, 91.5, 90.5]
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    t = (np.mean(a) - np.mean(b)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))  # Welch-Satterthwaite
    assert welch_p(a, b) == pytest.approx(2 * stats.t.sf(abs(t), df), rel=1e-12)
    assert welch_p([1.0, 1.0, 1.0], [1.0, 1.0, 1.0]) == 1.0  # constant and equal: a tie
    assert welch_p([1.0, 1.0, 1.0], [2.0, 2.0, 2.0]) == 0.0  # constant and different
    assert math.isnan(welch_p([1.0], [2.0, 3.0]))
    assert not tie_with_best([1.0, 2.0], [1.0, 2.0]).tested


def test_tex_escape_keeps_pdflatex_happy():
    assert tex_escape("20% & a_b ± 1 ≈ α=0.5 --set") == (
        r"20\% \& a\_b $\pm$ 1 $\approx$ $\alpha$=0.5 -{}-set"
    )


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="no LaTeX engine (pdflatex)")
def test_table_tex_compiles_with_booktabs(tmp_path: Path):
    folder = write_table(tmp_path, paper_like_table(), spread, preset="quick")
    build_report(folder, paper_numbers=True)
    doc = tmp_path / "doc.tex"
    doc.write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{graphicx}\n"
        f"\\begin{{document}}\n\\input{{{folder / 'table.tex'}}}\n\\end{{document}}\n"
    )
    result = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:]
    assert (tmp_path / "doc.pdf").stat().st_size > 5_000
    if shutil.which("pdftotext"):
        text = subprocess.run(
            ["pdftotext", "-layout", "doc.pdf", "-"], cwd=tmp_path, capture_output=True, text=True
        ).stdout
        assert "LogReg / Dir-0.6" in text and "paper (CIFAR-100, ResNet-18)" in text
        assert "66.12 ± 0.10" in text and "81.00 ± 1.00" in text


def test_columns_that_ran_the_same_data_name_what_they_stand_in_for(tmp_path: Path):
    data = paper_like_table()
    data["grid"] = {"data.name": ["cifar10", "cifar100"]}
    data["presets"]["quick"]["model.name"] = "logreg"
    folder = write_table(tmp_path, data, spread, preset="quick")
    report = build_report(folder)
    labels = [g.label for g in report.view.groups if g.setting_json]
    assert labels == ["digits for CIFAR-10", "digits for CIFAR-100"]
    assert [g.paper_label for g in report.view.groups if g.setting_json] == [
        "CIFAR-10",
        "CIFAR-100",
    ]
    assert report.view.paper_label == "paper (CIFAR-10 / CIFAR-100, ResNet-18)"


def test_what_ran_names_the_privacy_setting_per_column():
    from fedbench.report.ran import describe, facts

    base = {
        "data": {"name": "digits"},
        "model": {"name": "logreg"},
        "partition": {"clients": 10, "kind": "dirichlet", "alpha": 0.6},
        "fl": {"participation": 0.3, "rounds": 20, "local_steps": 10, "batch_size": 32},
    }
    dp = {"noise_multiplier": 1.0, "clip": 0.1, "delta": 1e-5, "target_epsilon": None}
    col_a = [{**base, "privacy": dp}]
    col_b = [{**base, "privacy": {**dp, "delta": 1e-6}}]
    text = describe(facts({"a": col_a, "b": col_b}))
    assert text == (
        "digits, model LogReg; 10 clients (dirichlet, alpha 0.6), 30% (3 per round) "
        "participation; 20 rounds, K=10 local steps, B=32; DP σ=1, C=0.1, δ=1e-05 or "
        "DP σ=1, C=0.1, δ=1e-06 (per column)"
    )
    assert describe(facts({"a": [{**base, "privacy": None}]})).endswith("B=32")


def test_tuned_values_are_stated_per_row_and_column(tmp_path: Path):
    """Issue 40: the --tuned report names the columns tuned.yaml tuned and those that ran the
    table's own values (only the Dir-0.6 column was tuned here)."""
    from fedbench.runner.table_config import column_key

    data = paper_like_table()
    setting = {"model.name": "resnet18", "partition.alpha": 0.6}
    tuned = {"FedAdamW": {column_key(setting): {"algorithm.lr": 0.02}}}
    folder = write_table(tmp_path, data, spread, preset="quick", tuned=tuned)
    report = build_report(folder)
    assert report.view.details.endswith(
        "; tuned (fedbench tune, chosen on an unrecorded split (plan.json predates the record)): "
        "FedAdamW in LogReg / Dir-0.6 (algorithm.lr=0.02), not in "
        "LogReg / Dir-0.1 (the table's values); not tuned (the table's "
        "values): Local SGD"
    )
    assert "not in LogReg / Dir-0.1" in (folder / "table.md").read_text()


def test_one_seed_has_no_bold_and_the_legend_says_1_seed(tmp_path: Path):
    folder = write_table(tmp_path, tiny_table_data(), spread, seeds=1)
    report = build_report(folder)
    md = (folder / "table.md").read_text()
    assert "**" not in md.split("| method")[1].split("## paper")[0]
    assert "| Local SGD | 60.00 |" in md and "| FedAdamW | 80.00 |" in md  # not bold
    assert not report.summary["best"].any()
    legend = report.view.legend()
    assert legend[0].startswith("cells: the value of 1 seed (n = 1: no ±)")
    assert "every seed gives the same value" not in " ".join(legend)
    assert legend[1].startswith("no bold: with 1 seed per cell")
    assert r"\textbf" not in (folder / "table.tex").read_text()
    assert "Values of 1 seed (no std, no bold)" in (folder / "table.tex").read_text()


def test_a_cell_of_one_seed_among_more_says_1_seed_and_its_column_has_no_bold(tmp_path: Path):
    data = tiny_table_data()
    data["grid"] = {"partition.alpha": [0.6, 0.1]}
    plan = expand(parse_table_config(data))
    for run in plan.runs:  # Dir-0.1 FedAdamW: seed 1 failed, one seed left
        failed = run.method == "FedAdamW" and run.setting["partition.alpha"] == 0.1 and run.seed
        status = "failed" if failed else "completed"
        fake_run(tmp_path / "runs" / run.run_id, run.cfg, spread(run.method, {}, run.seed), status)
    write_plan(plan, tmp_path / plan.name)
    report = build_report(tmp_path / plan.name)
    md = (tmp_path / plan.name / "table.md").read_text()
    assert "| FedAdamW | **80.50 ± 0.71** |" in md  # Dir-0.6: two seeds a cell, bold as before
    assert "80.00 (1 seed, 1 failed)" in md and "**80.00" not in md  # Dir-0.1: no bold
    assert "'1 seed' where n = 1" in report.view.legend()[0]


def test_summary_csv_labels_rows_by_what_ran_and_keeps_the_papers_setting_apart(tmp_path: Path):
    folder = write_table(
        tmp_path, paper_like_table(), spread, preset="quick", overrides=["algorithm.lr=0.05"]
    )
    build_report(folder)
    long = pd.read_csv(folder / "summary.csv")
    # what ran, per row: never the grid's resnet18 / the paper's dataset
    assert set(long["model.name"]) == {"logreg"} and set(long["data.name"]) == {"digits"}
    assert set(long["fl.rounds"]) == {3} and set(long["algorithm.lr"]) == {0.05}
    assert set(long["preset"]) == {"quick"}
    # the paper's setting, and its numbers, in columns that say so
    assert set(long["paper_model.name"]) == {"resnet18"}
    assert set(long["paper_data.name"]) == {"cifar100"} and set(long["paper_fl.rounds"]) == {300}
    assert "paper_mean" not in long.columns and "paper_std" not in long.columns
    cell = long[
        (long["method"] == "FedAdamW")
        & (long["partition.alpha"] == 0.6)
        & (long["metric"] == "test_acc")
    ]
    assert list(cell["paper_mean_at_paper_setting"]) == [66.12]
    assert list(cell["mean"]) == [81.0] and list(cell["n"]) == [3]
    front = ["method", "model.name", "partition.alpha", "data.name", "partition.clients"]
    assert list(long.columns[: len(front)]) == front


def test_summary_csv_at_the_papers_setting_keeps_the_design_columns(tmp_path: Path):
    folder = write_table(tmp_path, paper_like_table(), spread)
    build_report(folder)
    long = pd.read_csv(folder / "summary.csv")
    columns = list(long.columns)
    assert columns[:3] == ["method", "model.name", "partition.alpha"]  # the grid keys first
    at = columns.index("metric")
    assert columns[at : at + 6] == ["metric", "mean", "std", "n", "paper_mean", "paper_std"]
    # then every other setting the report states (the same in every run, or per row)
    assert set(columns[3:at]) == {"algorithm.name", "algorithm.lr", "eval.train_subset"}
    assert "preset" not in long.columns and "paper_model.name" not in long.columns
    cell = long[
        (long["method"] == "FedAdamW")
        & (long["partition.alpha"] == 0.6)
        & (long["metric"] == "test_acc")
    ]
    assert list(cell["paper_mean"]) == [66.12] and list(cell["model.name"]) == ["resnet18"]
    wide = pd.read_csv(folder / "table.csv")
    assert "paper ResNet-18 / Dir-0.6: acc (%)" in wide.columns
    assert "ResNet-18 / Dir-0.6: acc (%)" in wide.columns


def own_table() -> dict:
    """A researcher's own table (no paper): 14x14 images, Dirichlet-0.1 against 2 shards per
    client as the columns, and a title."""
    data = tiny_table_data()
    del data["paper"], data["presets"]
    data["title"] = "Digits 14x14: Dirichlet-0.1 vs 2 shards per client"
    data["base"]["data"]["image_size"] = 14
    data["base"]["partition"].update(alpha=0.1, shards_per_client=2)
    data["grid"] = {"partition.kind": ["dirichlet", "shards"]}
    return data


def test_an_own_table_names_every_setting_that_ran_where_it_applies(tmp_path: Path):
    """image_size (the same in every run), alpha and the shard count (per column, each where
    its kind reads it), the rows' algorithms and hyperparameters, and the table's own title:
    in table.md, table.tex and summary.csv."""
    folder = write_table(tmp_path, own_table(), spread)
    report = build_report(folder)
    md = (folder / "table.md").read_text()
    assert md.startswith("# Digits 14x14: Dirichlet-0.1 vs 2 shards per client\n")
    assert (
        "**What ran:** digits, model LogReg; 5 clients (Dir-0.1 or shards 2/client (per column)), "
        "40% (2 per round) participation; 3 rounds, K=2 local steps, B=16; also "
        "data.augment=false, data.image_size=14, eval.train_subset=200." in md
    )
    # FedAvg's lr is its default (0.1): still shown, as the value that ran beside FedAdamW's
    assert "**Rows:** Local SGD: fedavg, lr=0.1; FedAdamW: fedadamw, lr=0.01." in md
    assert "| method | Dir-0.1: acc (%) | Dir-0.1: train loss | shards 2/client: acc (%) |" in md
    assert "kind=" not in md
    tex = (folder / "table.tex").read_text()
    # One sentence of caption; what ran in the \footnotesize note under the table (issue 47).
    caption = (
        r"\caption{Digits 14x14: Dirichlet-0.1 vs 2 shards per client: mean $\pm$ std over seeds.}"
    )
    assert caption in tex
    assert r"{\footnotesize\raggedright What ran: digits" in tex
    assert (
        r"data.image\_size=14" in tex
        and r"Rows: Local SGD: fedavg, lr=0.1; FedAdamW: fedadamw" in tex
    )
    assert r"\multicolumn{2}{c}{Dir-0.1}" in tex and r"\multicolumn{2}{c}{shards 2/client}" in tex
    long = pd.read_csv(folder / "summary.csv")
    acc = long[long["metric"] == "test_acc"].set_index(["method", "partition.kind"])
    assert acc.loc[("FedAdamW", "dirichlet"), "partition.alpha"] == 0.1
    assert math.isnan(acc.loc[("FedAdamW", "shards"), "partition.alpha"])  # not read by shards
    assert acc.loc[("FedAdamW", "shards"), "partition.shards_per_client"] == 2
    assert math.isnan(acc.loc[("FedAdamW", "dirichlet"), "partition.shards_per_client"])
    assert set(long["data.image_size"]) == {14}
    assert acc.loc[("FedAdamW", "shards"), "algorithm.lr"] == 0.01
    assert acc.loc[("Local SGD", "shards"), "algorithm.name"] == "fedavg"
    assert report.view.title == own_table()["title"]


def test_column_labels_name_the_columns_and_the_report_says_what_each_ran(tmp_path: Path):
    data = own_table()
    data["column_labels"] = {"partition.kind": {"dirichlet": "Dir", "shards": "Pathological"}}
    folder = write_table(tmp_path, data, spread)
    build_report(folder)
    md = (folder / "table.md").read_text()
    assert "| method | Dir: acc (%) |" in md and "| Pathological: acc (%) |" in md
    assert "**Columns:** Dir: Dir-0.1; Pathological: shards 2/client." in md
    assert (
        r"Columns: Dir: Dir-0.1; Pathological: shards 2/client."
        in (folder / "table.tex").read_text()
    )
    data["column_labels"] = {"partition.kind": {"dirchlet": "Dir"}}
    with pytest.raises(FedbenchError, match="'dirchlet' is not one of the grid's values"):
        parse_table_config(data)


def test_report_ci_shows_the_95_percent_interval_in_the_cells(tmp_path: Path, run_cli):
    data = tiny_table_data()
    data["seeds"] = [0, 1, 2]
    data["metrics"] = ["test_acc"]
    acc = {"FedAdamW": [90.0, 91.0, 92.0], "Local SGD": [50.0, 51.0, 52.5]}
    folder = write_table(tmp_path, data, lambda m, s, seed: acc[m][seed])
    code, _, err = run_cli("report", str(folder), "--ci")
    assert code == 0, err
    half = stats.t.ppf(0.975, 2) * 1.0 / math.sqrt(3)  # s = 1 for 90, 91, 92
    assert f"{91 - half:.2f}, {91 + half:.2f}" == "88.52, 93.48"
    md = (folder / "table.md").read_text()
    assert "| FedAdamW | **91.00 ± 1.00 [88.52, 93.48]** |" in md
    assert "[low, high]: the 95 % confidence interval of the mean" in md
    build_report(folder)  # without --ci: no interval in the cells, still in summary.csv
    assert "[88.52, 93.48]" not in (folder / "table.md").read_text()
    long = pd.read_csv(folder / "summary.csv").set_index("method")
    assert long.loc["FedAdamW", "ci95_low"] == pytest.approx(91 - half, rel=1e-12)


def test_summary_csv_columns_keep_one_order_whichever_row_ran_first(tmp_path: Path):
    # The rows state different settings (Local SGD: lr and weight_decay; FedAdamW: alpha); the
    # setting columns used to follow the first row's, so listing the rows the other way round
    # (or running --methods FedAdamW first) moved them.
    data = tiny_table_data()
    data["methods"]["FedAdamW"]["algorithm"]["beta2"] = 0.98
    swapped = tiny_table_data()
    swapped["methods"] = dict(reversed(list(data["methods"].items())))
    columns = []
    for name, table in (("a", data), ("b", swapped)):
        folder = write_table(tmp_path / name, table, spread)
        build_report(folder)
        columns.append(list(pd.read_csv(folder / "summary.csv").columns))
    assert columns[0] == columns[1]
    setting = columns[0][1 : columns[0].index("metric")]
    assert setting == [
        "partition.alpha",  # the grid keys first, then by section, alphabetically within one
        "data.augment",
        "algorithm.beta2",
        "algorithm.lr",
        "algorithm.name",
        "eval.train_subset",
    ]
