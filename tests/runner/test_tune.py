"""`fedbench tune`: per-cell studies on a validation split, tuned.yaml, `run --tuned`, resume."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import optuna
import pytest
import yaml

from fedbench.config import load_run_config
from fedbench.engine.run_folder import RunFolder
from fedbench.errors import FedbenchError
from fedbench.runner.launcher import launch
from fedbench.runner.space import row_space
from fedbench.runner.table_config import column_key, expand, parse_table_config
from fedbench.runner.tune import (
    STUDY_FILE,
    Cell,
    Trial,
    _report_progress,
    load_tuned,
    parse_grid,
    parse_space,
    tune,
)
from tests.conftest import tiny_table_data

LRS = [0.003, 0.3]


def _table(tmp_path: Path) -> Path:
    data = tiny_table_data()
    data["methods"] = {"Local SGD": data["methods"]["Local SGD"]}
    data["base"]["fl"]["rounds"] = 2
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _plan(path: Path):
    return expand(parse_table_config(yaml.safe_load(path.read_text())), seeds=1)


def _tune(plan, out: Path, trials: int | None = None, lrs: list[float] = LRS):
    return tune(
        plan,
        [parse_grid("algorithm.lr=" + ",".join(map(str, lrs)))],
        out=out,
        trials=trials,
        rounds=None,
        val_fraction=0.2,
        launch=lambda p: launch(p, out, workers=1),
        # These tests count trials: a median-pruned trial (timing-dependent on a loaded machine,
        # where the driver reads a round before the run ends) would count as pruned.
        pruner="none",
    )


def test_space_and_grid_parsing() -> None:
    field = parse_space("algorithm.lr=log:1e-4:1e-1")
    assert (field.key, field.kind, field.values) == ("algorithm.lr", "log", (1e-4, 1e-1))
    assert parse_grid("algorithm.alpha=0,0.5,1").values == (0, 0.5, 1)
    for bad in ("algorithm.lr", "algorithm.lr=log:1", "algorithm.lr=log:0:1", "x=cubic:1:2"):
        with pytest.raises(FedbenchError):
            parse_space(bad)


@pytest.mark.slow
def test_grid_tune_picks_the_best_validation_score_and_run_uses_it(tmp_path: Path, run_cli):
    path = _table(tmp_path)
    result = _tune(_plan(path), tmp_path)
    # Every grid value ran once, on the validation split, and the best one was chosen.
    scores = {}
    for run_dir in (tmp_path / "runs").iterdir():
        cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
        summary = json.loads((run_dir / "summary.json").read_text())
        assert cfg["data"]["val_fraction"] == 0.2 and summary["eval_split"] == "validation"
        scores[cfg["algorithm"]["lr"]] = summary["final"]["test_acc"]
    assert sorted(scores) == LRS
    best = max(scores, key=scores.get)
    column = "partition.alpha=0.6"
    assert result.tuned == {"Local SGD": {column: {"algorithm.lr": best}}}
    written = yaml.safe_load((result.folder / "tuned.yaml").read_text())
    assert written["rows"]["Local SGD"][column]["score"] == pytest.approx(scores[best], abs=1e-4)
    assert written["rows"]["Local SGD"][column]["objective"]["split"] == "validation"

    # `run --tuned` trains every seed of the cell at the tuned value, on the test set.
    code, _, err = run_cli(
        "run", str(path), "--tuned", str(result.folder / "tuned.yaml"), "--out", str(tmp_path)
    )
    assert code == 0, err
    plan = json.loads((tmp_path / "tiny-tuned" / "plan.json").read_text())
    assert plan["tuned"] == result.tuned
    # The report says on which data the values were chosen.
    assert plan["tuned_on"] == "a 0.2 validation split of the training data"
    assert (
        "chosen on a 0.2 validation split of the training data"
        in (tmp_path / "tiny-tuned" / "table.md").read_text()
    )
    for run in plan["runs"]:
        cfg = yaml.safe_load((tmp_path / "runs" / run["run_id"] / "config.yaml").read_text())
        assert cfg["algorithm"]["lr"] == best and cfg["data"]["val_fraction"] == 0.0


@pytest.mark.slow
def test_a_killed_tune_resumes_its_unfinished_trial_without_new_ones(tmp_path: Path):
    plan = _plan(_table(tmp_path))
    _tune(plan, tmp_path, trials=1)
    storage = f"sqlite:///{(tmp_path / 'tiny-tune' / STUDY_FILE).resolve()}"
    [study_name] = optuna.get_all_study_names(storage)
    assert study_name.startswith("Local SGD | partition.alpha=0.6 | algorithm.lr=grid:0.003:0.3")
    study = optuna.load_study(study_name=study_name, storage=storage)
    # A kill in the middle of the second trial leaves it RUNNING in the study.
    grid = parse_grid("algorithm.lr=" + ",".join(map(str, LRS))).distribution()
    # Grid points are enqueued as they are asked for: the tune enqueued the second, then asked.
    study.enqueue_trial({"algorithm.lr": 0.3})
    stale = study.ask({"algorithm.lr": grid})
    assert stale.number == 1
    result = _tune(plan, tmp_path, trials=2)
    trials = optuna.load_study(study_name=study_name, storage=storage).get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE"]  # resumed, none added
    assert trials[1].params == {"algorithm.lr": 0.3}
    assert result.rows[0][4:] == (2, 0, 0)


@pytest.mark.slow
def test_an_extended_grid_starts_a_new_study_and_trains_only_the_new_value(tmp_path: Path):
    plan = _plan(_table(tmp_path))
    _tune(plan, tmp_path)
    trained = {
        p.name: (p / "summary.json").stat().st_mtime_ns for p in (tmp_path / "runs").iterdir()
    }
    result = _tune(plan, tmp_path, lrs=[*LRS, 0.03])
    storage = f"sqlite:///{(tmp_path / 'tiny-tune' / STUDY_FILE).resolve()}"
    assert len(optuna.get_all_study_names(storage)) == 2  # the first study is kept as it was
    after = {p.name: (p / "summary.json").stat().st_mtime_ns for p in (tmp_path / "runs").iterdir()}
    assert len(after) == len(trained) + 1  # only lr 0.03 trained
    assert all(after[name] == mtime for name, mtime in trained.items())
    assert result.rows[0][4:] == (3, 0, 0)
    written = (result.folder / "tuned.yaml").read_text()
    assert "&id" not in written and "grid:0.003:0.3:0.03" in written


def test_a_pruned_trial_is_asked_to_stop_and_the_engine_stops(tmp_path: Path, run_cli):
    from tests.conftest import TINY

    class Hopeless:
        def __init__(self) -> None:
            self.reported: list[tuple[float, int]] = []

        def report(self, value: float, step: int) -> None:
            self.reported.append((value, step))

        def should_prune(self) -> bool:
            return True

    plan = _plan(_table(tmp_path))
    run = plan.runs[0]
    folder = RunFolder.for_config(tmp_path, run.cfg)
    folder.path.mkdir(parents=True)
    folder.metrics.write_text('{"round": 0, "test_acc": 10.0}\n{"round": 1, "test_acc": 12.5}\n')
    trial = Hopeless()
    item = Trial(Cell(run.method, run.setting, run.cfg.to_dict()), trial, run)
    _report_progress(item, tmp_path)
    assert trial.reported == [(12.5, 1)]  # round 0 (the initial model) is not a trial's result
    assert "median" in (folder.stop_requested() or "")

    # A STOP request ends a training run after its next evaluation, as `stopped` (final).
    args = [*TINY, "--set", "eval.every=1"]
    cfg = load_run_config(None, args[1::2])
    target = RunFolder.for_config(tmp_path / "t", cfg)
    target.request_stop("by hand")
    code, _, err = run_cli("train", *args, "--out", str(tmp_path / "t"))
    assert code == 0, err
    summary = json.loads(target.summary.read_text())
    assert summary["status"] == "stopped" and summary["error"] == "by hand"
    assert summary["final"]["round"] == 1 and len(target.read_metrics()) == 2
    assert target.is_finished()


def test_tuned_file_for_another_table_is_refused(tmp_path: Path) -> None:
    table = parse_table_config(tiny_table_data())
    other = tmp_path / "tuned.yaml"
    other.write_text(yaml.safe_dump({"table": "table1", "rows": {}}))
    with pytest.raises(FedbenchError, match=r"not a tuned\.yaml for table 'tiny'"):
        load_tuned(other, table)


def test_tune_command_line_writes_tuned_yaml(tmp_path: Path, run_cli) -> None:
    path = _table(tmp_path)
    code, out, err = run_cli(
        "tune", str(path), "--grid", "algorithm.lr=0.1", "--rounds", "1", "--out", str(tmp_path)
    )
    assert code == 0, err
    written = yaml.safe_load((tmp_path / "tiny-tune" / "tuned.yaml").read_text())
    assert written["rows"]["Local SGD"]["partition.alpha=0.6"]["values"] == {"algorithm.lr": 0.1}
    assert "--tuned" in out


def test_tune_prints_columns_by_what_ran_and_keeps_the_grid_key_in_tuned_yaml(
    tmp_path: Path, run_cli
) -> None:
    data = yaml.safe_load(_table(tmp_path).read_text())
    data["presets"] = {"small": {"partition.alpha": {0.6: 0.3}}}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    code, out, err = run_cli(
        "tune",
        str(path),
        "--preset",
        "small",
        "--grid",
        "algorithm.lr=0.1",
        "--rounds",
        "1",
        "--out",
        str(tmp_path),
    )
    assert code == 0, err
    assert "Local SGD | Dir-0.3 for Dir-0.6 trial 0" in out  # the trial line
    assert "│ Dir-0.3 for Dir-0.6" in out and "partition.alpha=0.6" not in out.split("wrote")[0]
    written = yaml.safe_load((tmp_path / "tiny-small-tune" / "tuned.yaml").read_text())
    assert list(written["rows"]["Local SGD"]) == ["partition.alpha=0.6"]


def test_table_tuning_spaces_are_validated() -> None:
    data = tiny_table_data()
    data["tuning"] = {"Local SGD": {"algorithm.lr": [0.01, 0.1]}, "FedAdamW": {"x": "log:1:2"}}
    table = parse_table_config(data)
    assert [f.values for f in row_space("Local SGD", table.tuning["Local SGD"])] == [(0.01, 0.1)]
    assert row_space("FedAdamW", table.tuning["FedAdamW"])[0].kind == "log"
    for bad, message in (
        ({"Local SDG": {"algorithm.lr": [0.1]}}, "'Local SDG' is not a row; did you mean"),
        ({"Local SGD": {"algorithm.lr": []}}, "lists no values"),
        ({"Local SGD": {"algorithm.lr": "log:0:1"}}, "LOW > 0 for log"),
        ({"Local SGD": {"algorithm.lr": 0.1}}, "must be a list of values"),
    ):
        with pytest.raises(FedbenchError, match=message):
            parse_table_config({**tiny_table_data(), "tuning": bad})


def test_tune_without_space_searches_each_rows_own_tuning_space(tmp_path: Path, run_cli) -> None:
    data = tiny_table_data()
    data["base"]["fl"]["rounds"] = 1
    # Local SGD searches its client lr, FedAdamW its alpha; a row without a space is left out.
    data["methods"]["Untuned"] = {"algorithm": {"name": "fedavg"}}
    data["tuning"] = {
        "Local SGD": {"algorithm.lr": [0.05]},
        "FedAdamW": {"algorithm.alpha": [0.25]},
    }
    path = tmp_path / "spaced.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    code, out, err = run_cli("tune", str(path), "--out", str(tmp_path))
    assert code == 0, err
    assert "not tuned (no tuning space in tiny): Untuned" in out
    rows = yaml.safe_load((tmp_path / "tiny-tune" / "tuned.yaml").read_text())["rows"]
    column = "partition.alpha=0.6"
    assert rows["Local SGD"][column]["values"] == {"algorithm.lr": 0.05}
    assert rows["Local SGD"][column]["space"] == {"algorithm.lr": "grid:0.05"}
    assert rows["FedAdamW"][column]["values"] == {"algorithm.alpha": 0.25}
    assert rows["FedAdamW"][column]["space"] == {"algorithm.alpha": "grid:0.25"}
    assert "Untuned" not in rows
    trained = {
        yaml.safe_load((p / "config.yaml").read_text())["algorithm"]["name"]
        for p in (tmp_path / "runs").iterdir()
    }
    assert trained == {"fedavg", "fedadamw"} and len(list((tmp_path / "runs").iterdir())) == 2
    # A table without spaces still needs --space/--grid.
    code, _, err = run_cli("tune", str(_table(tmp_path)), "--out", str(tmp_path))
    assert code == 2 and "--space or --grid" in err
    # --methods naming only rows without a space says which rows have one.
    code, _, err = run_cli("tune", str(path), "--methods", "Untuned", "--out", str(tmp_path))
    assert code == 2 and "rows with one: Local SGD, FedAdamW" in err


@pytest.mark.parametrize("name", ["fedadamom-main", "fedadamom-leaf"])
def test_fedadamom_tables_carry_valid_spaces_for_their_tuned_baselines(name: str) -> None:
    """Every grid point of every row's space is a valid run config, at the paper's settings and
    at the quick preset (`fedbench tune NAME` needs no --space)."""
    from fedbench.runner.table_config import load_table
    from fedbench.runner.tune import _trial_run, tuning_cells

    table = load_table(name)
    assert {"FedAdam", "FedYogi", "FedAdagrad", "FADAS", "FAFED"} <= set(table.tuning)
    for preset in (None, "quick"):
        plan = expand(table, preset=preset, seeds=1, methods=list(table.tuning))
        for cell in tuning_cells(plan, rounds=None, val_fraction=0.1):
            for f in row_space(cell.method, table.tuning[cell.method]):
                for value in f.values:
                    cfg = _trial_run(cell, {f.key: value}, plan).cfg
                    assert cfg.to_dict()["algorithm"][f.key.split(".")[1]] == value
    # The shipped quick-preset tune applies to the table (tuned rows, known columns).
    shipped = Path(__file__).parents[2] / "configs" / "fedadamom" / "tuned" / f"{name}-quick.yaml"
    if shipped.is_file():
        tuned = load_tuned(shipped, table)
        plan = expand(table, preset="quick", seeds=1, tuned=tuned)
        columns = {column_key(r.setting) for r in plan.runs}
        assert all(set(cells) <= columns for cells in tuned.values())
        fafed = [
            r for r in plan.runs if r.method == "FAFED" and r.setting["data.name"] != "cifar10"
        ]
        assert fafed and all(
            r.cfg.algorithm.lr == tuned["FAFED"][column_key(r.setting)]["algorithm.lr"]
            for r in fafed
        )


def test_a_tuned_file_from_before_the_held_out_split_is_reported_as_chosen_on_the_test_set(
    tmp_path: Path,
) -> None:
    from fedbench.runner.tune import TEST_SET_TUNED, tuned_split

    objective = {"metric": "test_acc", "split": "validation", "val_fraction": 0.1, "rounds": 20}
    cell = {"values": {"algorithm.lr": 0.1}, "objective": objective}
    old = tmp_path / "old.yaml"
    old.write_text(yaml.safe_dump({"table": "tiny", "rows": {"Local SGD": {"-": cell}}}))
    assert tuned_split(old) == TEST_SET_TUNED
    new = tmp_path / "new.yaml"
    cell = {**cell, "objective": {**objective, "test_set_seen": False}}
    new.write_text(yaml.safe_dump({"table": "tiny", "rows": {"Local SGD": {"-": cell}}}))
    assert tuned_split(new) == "a 0.1 validation split of the training data (20-round trials)"


def test_tune_without_optuna_installed_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain `pip install fedbench` has neither Optuna nor SQLAlchemy (its dependency): the
    study store's error guard asked for SQLAlchemy first, a traceback in a fresh virtualenv."""
    from fedbench.runner.tune import study_errors

    monkeypatch.setitem(sys.modules, "optuna", None)  # import fails: ImportError
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)
    monkeypatch.setitem(sys.modules, "sqlalchemy.exc", None)
    needs = r"needs Optuna; install it with .*fedbench\[tune\]"
    with pytest.raises(FedbenchError, match=needs), study_errors(tmp_path / "study.db"):
        pass
