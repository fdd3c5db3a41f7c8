"""`fedbench runs` lists run folders by what tells them apart; `fedbench plot` overlays curves."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from fedbench.config import parse_run_config
from fedbench.errors import FedbenchError
from fedbench.report.runs import distinguishing, list_runs, read_curves
from tests.report.helpers import fake_run


def cfg(algorithm: dict, seed: int = 0):
    return parse_run_config({"seed": seed, "model": {"name": "logreg"}, "algorithm": algorithm})


@pytest.fixture
def out(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    fake_run(runs / "a", cfg({"name": "fedadamw", "alpha": 0.1}), 80.0)
    fake_run(runs / "b", cfg({"name": "fedadamw", "alpha": 0.6}), 85.0)
    fake_run(runs / "c", cfg({"name": "fedavg", "lr": 0.1}), 70.0, status="diverged")
    fake_run(runs / "d", cfg({"name": "fedavg", "lr": 0.1}, seed=1), 60.0)
    (runs / "d" / "summary.json").unlink()  # still going, or stopped: no summary yet
    (runs / "d" / "checkpoint.pt").write_bytes(b"")
    return tmp_path


def test_runs_lists_status_distinguishing_fields_and_final_metrics(out: Path):
    frame = list_runs(out)
    assert list(frame["run_id"]) == ["a", "b", "c", "d"]
    assert list(frame["status"]) == ["completed", "completed", "diverged", "interrupted"]
    # alpha tells the two FedAdamW runs apart; FedAdamW's other fields are not listed merely
    # because FedAvg lacks them
    assert {"seed", "algorithm.name", "algorithm.lr", "algorithm.alpha"} <= set(frame.columns)
    assert "algorithm.beta1" not in frame.columns and "runtime.device" not in frame.columns
    assert list(frame["test_acc"]) == [80.0, 85.0, 70.0, 60.0]  # d: its last evaluation
    assert list(frame["round"]) == [2, 2, 2, 2]


def test_runs_where_filters_on_config_fields_and_status(out: Path):
    assert list(list_runs(out, ["algorithm.alpha=0.1"])["run_id"]) == ["a"]
    assert list(list_runs(out, ["algorithm.name=fedavg", "status=diverged"])["run_id"]) == ["c"]
    assert list_runs(out, ["algorithm.name=nope"]).empty
    with pytest.raises(FedbenchError, match=r"did you mean algorithm\.alpha"):
        list_runs(out, ["algorithm.alhpa=0.1"])
    (out / "empty").mkdir()
    with pytest.raises(FedbenchError, match="no run folders under"):
        list_runs(out / "empty")


def test_runs_cli_csv_and_table(out: Path, run_cli):
    code, stdout, _ = run_cli("runs", str(out), "--csv", "--where", "algorithm.name=fedadamw")
    assert code == 0
    frame = pd.read_csv(io.StringIO(stdout))
    assert list(frame["algorithm.alpha"]) == [0.1, 0.6]
    code, stdout, _ = run_cli("runs", str(out))
    assert code == 0 and "interrupted" in stdout and "runs in" in stdout
    code, _, err = run_cli("runs", str(out / "nowhere"))
    assert code == 2 and "does not exist" in err


def test_plot_overlays_runs_labelled_by_their_differences(out: Path, run_cli, tmp_path: Path):
    series, keys = read_curves(["a", str(out / "runs" / "b")], out / "runs")
    assert keys == ["algorithm.alpha"]
    assert list(series) == ["alpha=0.1", "alpha=0.6"]
    assert list(series["alpha=0.6"]["test_acc"]) == [65.0, 75.0, 85.0]
    png = tmp_path / "p.png"
    code, stdout, _ = run_cli("plot", "a", "b", "c", "--root", str(out), "--out", str(png))
    assert code == 0 and f"wrote {png}" in stdout and png.stat().st_size > 10_000
    code, _, err = run_cli("plot", "a", "--root", str(out), "--metric", "acc")
    assert code == 2 and "choose one of" in err and "test_acc" in err
    code, _, err = run_cli("plot", "zzz", "--root", str(out))
    assert code == 2 and "not a run folder" in err


def test_distinguishing_keeps_fields_every_config_shares():
    a = {"seed": 0, "algorithm": {"name": "x", "lr": 0.1}, "runtime": {"device": "cpu"}}
    b = {"seed": 1, "algorithm": {"name": "x", "lr": 0.1}, "runtime": {"device": "cuda"}}
    assert distinguishing([a, b]) == ["seed"]
