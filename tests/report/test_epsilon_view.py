"""`fedbench epsilon` below the command line (fedbench.report.epsilon): a table config or a
run config told apart, the per-cell table, the options that apply to tables only."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fedbench.errors import FedbenchError
from fedbench.listing import Listing
from fedbench.report.epsilon import (
    describe_privacy,
    epsilon_view,
    table_epsilon_listing,
    table_epsilons,
    table_name,
)
from fedbench.runner.sweep import make_plan


def test_table_name_tells_table_configs_from_run_configs(tmp_path: Path) -> None:
    run = tmp_path / "run.yaml"
    run.write_text(yaml.safe_dump({"privacy": {"noise_multiplier": 1.0}}))
    table = tmp_path / "table.yaml"
    table.write_text(yaml.safe_dump({"table": "t", "methods": {"A": {}}}))
    assert table_name(None) is None
    assert table_name(str(run)) is None
    assert table_name(str(table)) == str(table)
    assert table_name("dp_table2") == "dp_table2"  # a name: configs/dp/dp_table2.yaml
    assert table_name(str(tmp_path / "missing.yaml")) is None  # a run config's path: its error


def test_table_listing_is_the_worst_epsilon_per_cell() -> None:
    shown = table_epsilon_listing(
        "dp_table2", methods="DP-FedSAM, DP-FedAvg", seeds="0,1", client_size=1000
    )
    assert shown.title == "dp_table2: epsilon of the worst client (over seeds 0,1)"
    assert shown.columns == [
        "method",
        "column",
        "epsilon",
        "delta",
        "noise_multiplier",
        "accounting",
    ]
    plan = make_plan("dp_table2", methods=["DP-FedSAM", "DP-FedAvg"], seeds=[0, 1])
    cells = table_epsilons(plan, client_size=1000)
    assert [r[:5] for r in shown.rows] == [
        [m, c, f"{e:.2f}", f"{d:g}", f"{s:.4g}"] for m, c, e, d, s, _ in cells
    ]
    # The DP tables draw Poisson batches: every epsilon is exact.
    assert {a for *_, a in cells} == {"exact, not understated"}
    assert all(row[5].startswith("accounting: exact, not understated (") for row in shown.rows)
    assert {row[0] for row in shown.rows} == {"DP-FedSAM", "DP-FedAvg"}
    assert len(shown.rows) == 8  # 2 rows x 4 columns


def test_table_listing_prints_each_cells_accounting_line() -> None:
    """Issue 40: table mode dropped the `accounting:` line that a run config's view prints."""
    shown = table_epsilon_listing("dp_table2", methods="DP-FedAvg", seeds="1", client_size=1000)
    plan = make_plan("dp_table2", methods=["DP-FedAvg"], seeds=[0])
    for row, run in zip(shown.rows, plan.runs, strict=True):
        lines = describe_privacy(run.cfg, 1000).splitlines()
        [line] = [x for x in lines if x.startswith("accounting: ")]  # the run config's view
        assert row[5] == line


def test_a_table_without_private_runs_is_an_error() -> None:
    with pytest.raises(FedbenchError, match="table1: no private run in the selection"):
        table_epsilon_listing("table1", methods="FedAvg", seeds="1", client_size=10)


def test_epsilon_view_of_a_run_config_and_of_a_table() -> None:
    text = epsilon_view(None, overrides=["privacy.noise_multiplier=1.0"], client_size=100)
    assert isinstance(text, str) and text.startswith("epsilon ")
    from fedbench.config import load_run_config

    cfg = load_run_config(None, ["privacy.noise_multiplier=1.0"])
    assert text == describe_privacy(cfg, 100)
    table = epsilon_view("dp_table2", client_size=1000, methods="DP-FedAvg", seeds="0,")
    assert isinstance(table, Listing) and table.title.endswith("(over seeds 0)")
    with pytest.raises(FedbenchError, match="apply to table configs only"):
        epsilon_view(None, overrides=["privacy.noise_multiplier=1.0"], seeds="3")
