"""`fedbench runs` lists run folders by what tells them apart; `fedbench plot` overlays curves."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest

from fedbench import cli
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
    assert list(series) == ["α=0.1", "α=0.6"]
    assert list(series["α=0.6"]["test_acc"]) == [65.0, 75.0, 85.0]
    png = tmp_path / "p.png"
    code, stdout, _ = run_cli("plot", "a", "b", "c", "--root", str(out), "--out", str(png))
    assert code == 0 and f"wrote {png}" in stdout and png.stat().st_size > 10_000
    code, _, err = run_cli("plot", "a", "--root", str(out), "--metric", "acc")
    assert code == 2 and "choose one of" in err and "test_acc" in err
    code, _, err = run_cli("plot", "zzz", "--root", str(out))
    assert code == 2 and "no run 'zzz'" in err and "--root DIR" in err


def test_plot_labels_the_partition_alpha_apart_from_fedadamw_alpha(tmp_path: Path):
    runs = tmp_path / "runs"
    for alpha in (0.1, 0.6):
        config = cfg({"name": "fedadamw", "alpha": 0.5})
        config = config.model_copy(
            update={"partition": config.partition.model_copy(update={"alpha": alpha})}
        )
        fake_run(runs / f"dir{alpha}", config, 80.0)
    series, keys = read_curves(["dir0.1", "dir0.6"], runs)
    assert keys == ["partition.alpha"] and list(series) == ["Dir-0.1", "Dir-0.6"]


def test_a_bare_run_id_not_found_names_root(out: Path, run_cli, tmp_path: Path):
    code, _, err = run_cli("plot", "a", "--out", str(tmp_path / "p.png"))  # default --root results
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "no run 'a': not a folder, nor a run id in results/runs" in err and "--root DIR" in err
    (out / "runs" / "empty").mkdir()
    code, _, err = run_cli("plot", "empty", "--root", str(out))
    assert code == 2 and "has no metrics.jsonl" in err


def test_distinguishing_keeps_fields_every_config_shares():
    a = {"seed": 0, "algorithm": {"name": "x", "lr": 0.1}, "data": {"root": "/a"}}
    b = {"seed": 1, "algorithm": {"name": "x", "lr": 0.1}, "data": {"root": "/b"}}
    assert distinguishing([a, b]) == ["seed"]


def test_runtime_fields_tell_runs_apart_when_they_differ(tmp_path: Path, run_cli):
    runs = tmp_path / "runs"
    for engine in ("sequential", "vectorized"):
        config = cfg({"name": "fedavg"})
        runtime = config.runtime.model_copy(update={"engine": engine})
        fake_run(runs / engine, config.model_copy(update={"runtime": runtime}), 80.0)
    frame = list_runs(tmp_path)
    assert list(frame["runtime.engine"]) == ["sequential", "vectorized"]
    code, stdout, _ = run_cli("runs", str(tmp_path))
    assert code == 0 and "vectorized" in stdout and "sequential" in stdout
    # every run completed at round 2: said once in the title, not in a column per run
    assert "(every run: status completed, round 2)" in stdout and "│ completed" not in stdout


def test_runs_table_keeps_run_ids_and_keys_whole_at_200_columns(out: Path, run_cli, monkeypatch):
    monkeypatch.setattr(cli.console, "width", 200)
    long_id = "fedadamw-dir0.1-lr0.003-T3-part0.2-K10-digits-logreg-s0-5b872c1484"
    config = cfg({"name": "fedadamw", "alpha": 0.1})
    partition = config.partition.model_copy(update={"alpha": 0.1})
    fake_run(out / "runs" / long_id, config.model_copy(update={"partition": partition}), 1.0)
    code, stdout, _ = run_cli("runs", str(out))
    assert code == 0 and long_id in stdout and "…" not in stdout
    assert "partition." in stdout and "alpha " in stdout  # the dotted key, over two lines


def test_runs_format_csv_and_json(out: Path, run_cli):
    code, stdout, _ = run_cli("runs", str(out), "--format", "csv")
    assert code == 0 and stdout == run_cli("runs", str(out), "--csv")[1]
    assert list(pd.read_csv(io.StringIO(stdout))["status"])[-1] == "interrupted"
    code, stdout, _ = run_cli("runs", str(out), "--format", "json")
    records = json.loads(stdout)
    assert [r["run_id"] for r in records] == ["a", "b", "c", "d"]
    assert records[3]["wall_s"] is None and records[0]["test_acc"] == 80.0
    code, _, err = run_cli("runs", str(out), "--format", "xml")
    assert code == 2 and "use table, csv or json" in err


@pytest.mark.parametrize("width", [80, 100, 400])
def test_runs_table_never_wraps_a_run_id_and_fits_the_terminal(
    tmp_path: Path, run_cli, monkeypatch, width: int
):
    """At 100 columns long run ids wrapped over two lines: the columns the id spells already
    (seed, algorithm) and the later measurements make room first, then the ids move below the
    table, one per line."""
    monkeypatch.setattr(cli.console, "width", width)
    ids = []
    for seed, lr in ((0, 0.003), (1, 0.01)):
        config = cfg({"name": "local_adamw", "lr": lr}).model_copy(update={"seed": seed})
        run_id = f"local_adamw-split-shards-lr{lr}-T20-K10-fmnist-cnn-s{seed}-0123456789"
        fake_run(tmp_path / "runs" / run_id, config, 50.0 + seed)
        ids.append(run_id)
    code, stdout, _ = run_cli("runs", str(tmp_path))
    assert code == 0
    lines = stdout.splitlines()
    assert all(len(line.rstrip()) <= width for line in lines)
    for run_id in ids:  # each id whole, on one line
        assert sum(run_id in line for line in lines) == 1
    if width == 400:
        assert "seed" in stdout and "narrow terminal" not in stdout
    if width == 100:  # the id's own seed column makes room
        assert "narrow terminal: no seed" in stdout and "--format csv has them" in stdout
    assert ("run ids:" in stdout) is (width == 80)  # too narrow for the ids beside the table
    if width == 80:
        assert f"1 {ids[0]}" in stdout and f"2 {ids[1]}" in stdout
