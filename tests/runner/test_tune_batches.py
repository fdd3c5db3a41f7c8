"""Issue 40, point 4: the trials of one cell run `workers` at once (by default as many as
`fedbench run` would), `--pruner` chooses how trials are stopped early (default median), and a
pruned trial whose last value beats the winner is named in a note. The launcher is replaced by
one that writes each trial's metrics and summary: nothing trains."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from fedbench.engine.run_folder import RunFolder
from fedbench.errors import FedbenchError
from fedbench.runner import launcher
from fedbench.runner.orchestrate import TuneRequest, tune_table
from fedbench.runner.table_config import expand, parse_table_config
from fedbench.runner.tune import Cell, make_pruner, pruned_above_winner
from tests.conftest import tiny_table_data


def _table(tmp_path: Path) -> Path:
    data = tiny_table_data()
    data["methods"] = {"Local SGD": data["methods"]["Local SGD"]}
    path = tmp_path / "tiny.yaml"
    tmp_path.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


class FakeLaunch:
    """Records the size of every batch; each trial's curve is `curves[lr]` (one value per
    round), and a trial given `stopped` ends as the engine ends a pruned run."""

    def __init__(self, curves: dict[float, list[float]], stopped: set[float]) -> None:
        self.curves, self.stopped = curves, stopped
        self.batches: list[int] = []

    def __call__(self, plan: Any, out: Path, **_: Any) -> dict[str, Any]:
        self.batches.append(len(plan.runs))
        for run in plan.runs:
            lr = run.cfg.algorithm.lr
            folder = RunFolder.for_config(out, run.cfg)
            folder.path.mkdir(parents=True, exist_ok=True)
            curve = self.curves[lr][:1] if lr in self.stopped else self.curves[lr]
            rows = [{"round": r + 1, "test_acc": v} for r, v in enumerate(curve)]
            folder.metrics.write_text("".join(json.dumps(row) + "\n" for row in rows))
            status = "stopped" if lr in self.stopped else "completed"
            folder.write_summary({"status": status, "final": rows[-1]})
        return {}


def _request(tmp_path: Path, lrs: list[float], **kw: Any) -> TuneRequest:
    grid = "algorithm.lr=" + ",".join(map(str, lrs))
    return TuneRequest(target=str(_table(tmp_path)), grid=[grid], out=tmp_path, **kw)


def test_trials_of_one_cell_run_as_many_at_once_as_fedbench_run_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bug: without --workers a one-cell grid ran its trials one at a time."""
    fake = FakeLaunch({0.01: [40.0], 0.03: [42.0], 0.1: [41.0]}, set())
    monkeypatch.setattr(launcher, "launch", fake)
    monkeypatch.setattr(launcher, "visible_gpus", lambda: [])
    monkeypatch.setattr(launcher.os, "cpu_count", lambda: 4)
    view, _ = tune_table(_request(tmp_path, [0.01, 0.03, 0.1]), on_trial=lambda _: None)
    assert fake.batches == [3]  # all three trials in one batch, on 4 cores
    assert view.rows[0][2] == "algorithm.lr=0.03"
    # --workers 2 caps it: two trials, then the third.
    fake.batches.clear()
    tune_table(_request(tmp_path / "w", [0.01, 0.03, 0.1], workers=2), on_trial=lambda _: None)
    assert fake.batches == [2, 1]


def test_a_pruned_trial_that_beat_the_winner_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The newcomer's case: lr 0.01 stopped at 43.17 while the winner ended at 42.64."""
    curves = {0.01: [43.17, 44.0], 0.003: [40.0, 42.64]}
    fake = FakeLaunch(curves, stopped={0.01})
    monkeypatch.setattr(launcher, "launch", fake)
    said: list[str] = []
    tune_table(_request(tmp_path, [0.003, 0.01], workers=1), on_trial=said.append)
    [note] = [line for line in said if line.startswith("note:")]
    assert "trial 1 (algorithm.lr=0.01) was pruned at round 1 at validation test_acc 43.17" in note
    assert "above the winner's final 42.64 (trial 0: algorithm.lr=0.003)" in note
    assert "--pruner none" in note


def test_pruned_above_winner_reads_the_last_reported_value() -> None:
    study = optuna.create_study(direction="maximize")
    grid = optuna.distributions.CategoricalDistribution([0.1, 0.01, 0.001])
    behind = study.ask({"algorithm.lr": grid})
    behind.report(50.0, 1)
    behind.report(30.0, 2)  # its last value is behind the winner: no note
    study.tell(behind, state=optuna.trial.TrialState.PRUNED)
    winner = study.ask({"algorithm.lr": grid})
    study.tell(winner, 42.64)
    cell = Cell("FedAvg", {"partition.alpha": 0.1}, {}, study)
    assert pruned_above_winner(cell) == []
    ahead = study.ask({"algorithm.lr": grid})
    ahead.report(42.65, 3)
    study.tell(ahead, state=optuna.trial.TrialState.PRUNED)
    [note] = pruned_above_winner(cell)
    assert note.startswith("note: FedAvg | ") and "trial 2" in note and "at round 3" in note


def test_pruner_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli) -> None:
    assert isinstance(make_pruner("median"), optuna.pruners.MedianPruner)
    assert isinstance(make_pruner("halving"), optuna.pruners.SuccessiveHalvingPruner)
    assert isinstance(make_pruner("none"), optuna.pruners.NopPruner)
    used: list[str] = []
    import fedbench.runner.tune as tune_module

    monkeypatch.setattr(tune_module, "make_pruner", lambda n: used.append(n) or make_pruner(n))
    monkeypatch.setattr(launcher, "launch", FakeLaunch({0.1: [40.0]}, set()))
    tune_table(_request(tmp_path, [0.1], workers=1), on_trial=lambda _: None)
    tune_table(_request(tmp_path / "n", [0.1], workers=1, pruner="none"), on_trial=print)
    assert used == ["median", "none"]  # the default, then the one asked for
    with pytest.raises(FedbenchError, match=r"unknown pruner 'medain'.*median"):
        tune_table(_request(tmp_path, [0.1], pruner="medain"), on_trial=print)
    code, out, err = run_cli("tune", "--help")
    assert "--pruner" in out and "median (the default" in " ".join(out.split())
    code, _, err = run_cli("tune", str(_table(tmp_path)), "--grid", "a.b=1", "--pruner", "x")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "pruner" in err


def test_expand_is_unchanged_by_a_partial_tune() -> None:
    """A tuned.yaml of one column leaves the other columns at the table's values (the report
    says so): run ids of untuned cells do not change."""
    data = tiny_table_data()
    data["grid"] = {"partition.alpha": [0.6, 0.1]}
    table = parse_table_config(data)
    plain = expand(table, seeds=1)
    tuned = expand(
        table, seeds=1, tuned={"FedAdamW": {"partition.alpha=0.6": {"algorithm.lr": 0.5}}}
    )
    changed = {
        (a.method, a.setting["partition.alpha"])
        for a, b in zip(plain.runs, tuned.runs, strict=True)
        if a.run_id != b.run_id
    }
    assert changed == {("FedAdamW", 0.6)}
