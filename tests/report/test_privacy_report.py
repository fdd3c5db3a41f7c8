"""Issue 40, point 3: a table with private rows carries, per cell, the epsilon its runs spent
with delta and the accounting status (table.md / .csv / .tex, the terminal, the plot legend),
summary.csv has privacy columns, and `report --metric epsilon` works."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from fedbench.report import build_report
from fedbench.report.privacy_cells import method_labels
from fedbench.runner.sweep import write_plan
from fedbench.runner.table_config import expand, parse_table_config
from tests.conftest import tiny_table_data
from tests.report.helpers import fake_run

#: Per seed: (final accuracy, epsilon) of the private row (epsilon differs by seed: the clients
#: each seed draws differ, and with them the most-used client's steps).
DP = {0: (40.0, 3.25), 1: (41.0, 3.5), 2: (42.0, 3.125)}
ACCOUNTING = {
    "model": "per client, ...",
    "accounting": "approximate",
    "why": "fixed-size batches are accounted as Poisson sampling at q = B/n_i",
}


def _dp_folder(tmp_path: Path) -> Path:
    data = tiny_table_data()
    data["seeds"] = [0, 1, 2]
    data["metrics"] = ["test_acc"]
    data["methods"] = {
        "Local SGD": tiny_table_data()["methods"]["Local SGD"],
        "DP-FedAvg": {
            "algorithm": {"name": "dp_fedavg", "lr": 0.1},
            "privacy": {"noise_multiplier": 1.0, "clip": 0.5, "delta": 1.0e-5},
        },
    }
    plan = expand(parse_table_config(data))
    for run in plan.runs:
        folder = tmp_path / "runs" / run.run_id
        if run.method == "DP-FedAvg":
            acc, eps = DP[run.seed]
            fake_run(folder, run.cfg, acc)
            summary = json.loads((folder / "summary.json").read_text())
            summary |= {
                "epsilon": eps,
                "delta": 1e-5,
                "noise_multiplier": 1.0,
                "privacy_accounting": ACCOUNTING,
            }
            (folder / "summary.json").write_text(json.dumps(summary))
        else:
            fake_run(folder, run.cfg, 60.0 + run.seed)
    write_plan(plan, tmp_path / plan.name)
    return tmp_path / plan.name


def test_dp_table_carries_epsilon_delta_and_accounting_per_cell(tmp_path: Path) -> None:
    folder = _dp_folder(tmp_path)
    report = build_report(folder)
    # The worst seed's epsilon (3.5), with delta and the status as summary.json says it.
    cell = "3.50 (δ 1e-05, approximate)"
    md = (folder / "table.md").read_text()
    assert "ε (δ, accounting)" in md
    assert f"| DP-FedAvg | 41.00 ± 1.00 | {cell} |" in md
    assert "| Local SGD | **61.00 ± 1.00** | no DP |" in md
    assert (
        "accounting of DP-FedAvg: approximate (fixed-size batches are accounted as Poisson "
        "sampling at q = B/n_i)" in md
    )
    wide = pd.read_csv(folder / "table.csv")
    [epsilon_column] = [c for c in wide.columns if "ε" in c]
    assert list(wide[epsilon_column]) == ["no DP", cell]
    # table.tex: the epsilon cell holds the value; delta and the status are said once, in the
    # note under the table (issue 47: every cell used to repeat them).
    tex = (folder / "table.tex").read_text()
    assert r"DP-FedAvg & 41.00 $\pm$ 1.00 & 3.50 \\" in tex
    assert r"Local SGD & \textbf{61.00 $\pm$ 1.00} & no DP \\" in tex
    assert "1e-05, approximate" not in tex and tex.count("approximate") == 1
    assert (
        r"at $\delta$ = 1e-05; accounting: approximate (fixed-size batches are accounted as "
        r"Poisson sampling at q = B/n\_i); no DP: a row without DP" in tex
    )
    # summary.csv: privacy columns on every row of a cell, empty for the row without DP.
    long = pd.read_csv(folder / "summary.csv")
    acc = long[long["metric"] == "test_acc"].set_index("method")
    assert acc.loc["DP-FedAvg", "epsilon"] == 3.5
    assert acc.loc["DP-FedAvg", "delta"] == 1e-5
    assert acc.loc["DP-FedAvg", "sigma"] == 1.0 and acc.loc["DP-FedAvg", "clip"] == 0.5
    assert acc.loc["DP-FedAvg", "accounting"] == "approximate"
    assert math.isnan(acc.loc["Local SGD", "epsilon"])
    assert pd.isna(acc.loc["Local SGD", "accounting"])
    # The epsilon metric's own row is the mean over the seeds, and ranks nothing.
    eps = long[long["metric"] == "epsilon"].set_index("method")
    assert eps.loc["DP-FedAvg", "mean"] == pytest.approx((3.25 + 3.5 + 3.125) / 3, rel=1e-15)
    assert not eps["best"].any()
    assert any("accounting of DP-FedAvg" in line for line in report.view.legend())
    assert report.view.method_labels["DP-FedAvg"] == "DP-FedAvg (ε 3.50, δ 1e-05, approximate)"
    assert (folder / "curves.png").is_file()


def test_plot_legend_gives_the_range_of_epsilon_over_columns() -> None:
    runs = pd.DataFrame.from_records(
        [
            {"method": "DP", "setting": s, "status": "completed", "epsilon": e, "delta": 1e-5}
            | {"accounting": "exact"}
            for s, e in (("a", 3.0), ("a", 3.5), ("b", 8.4))
        ]
        + [{"method": "Plain", "setting": "a", "status": "completed", "epsilon": math.nan}]
    )
    labels = method_labels(runs, ["DP", "Plain"])
    assert labels == {"DP": "DP (ε 3.50-8.40, δ 1e-05, exact)", "Plain": "Plain"}


def test_report_metric_epsilon_works(tmp_path: Path, run_cli) -> None:
    folder = _dp_folder(tmp_path)
    code, out, err = run_cli("report", str(folder), "--metric", "epsilon")
    assert code == 0, err
    assert "unknown metric" not in err and "3.50 (δ 1e-05, approximate)" in out
