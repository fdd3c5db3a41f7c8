"""`fedbench tune`'s study store: one process per study, a damaged study.db or an SQLite error
as one line, grid points enqueued one at a time, grids and trials bounded."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path

import pytest
import yaml

from fedbench.errors import FedbenchError
from fedbench.readback import BadFile
from fedbench.runner.launcher import launch
from fedbench.runner.table_config import expand, parse_table_config
from fedbench.runner.tune import (
    MAX_TRIALS,
    STUDY_FILE,
    check_study_file,
    check_tuned_columns,
    grid_point,
    load_tuned,
    parse_grid,
    parse_space,
    study_errors,
    study_lock,
    tune,
)
from tests.conftest import tiny_table_data


def _plan():
    data = tiny_table_data()
    data["methods"] = {"Local SGD": data["methods"]["Local SGD"]}
    data["base"]["fl"]["rounds"] = 1
    return expand(parse_table_config(data), seeds=1)


def test_grid_points_come_in_itertools_product_order() -> None:
    fields = [parse_grid("a=1,2,3"), parse_grid("b=x,y"), parse_grid("c=0.1,0.2")]
    expected = [
        dict(zip("abc", point, strict=True))
        for point in itertools.product(*(f.values for f in fields))
    ]
    assert [grid_point(fields, i) for i in range(len(expected))] == expected


def test_a_huge_grid_or_trial_count_is_refused_with_its_count(tmp_path: Path) -> None:
    values = ",".join(str(i + 1) for i in range(100))
    fields = [parse_grid(f"fl.{k}={values}") for k in ("local_steps", "batch_size", "rounds")]
    kwargs = {"out": tmp_path, "rounds": 1, "val_fraction": 0.2, "launch": lambda p: {}}
    with pytest.raises(FedbenchError, match=r"the grid has 1,000,000 points, more than the 10,000"):
        tune(_plan(), fields, trials=None, **kwargs)
    space = [parse_space("algorithm.lr=log:1e-4:1")]
    with pytest.raises(
        FedbenchError, match=rf"--trials 1,000,000,000 is more than the {MAX_TRIALS:,}"
    ):
        tune(_plan(), space, trials=10**9, **kwargs)
    assert not (tmp_path / "tiny-tune" / STUDY_FILE).exists()


def test_a_grid_is_enqueued_as_it_is_asked_for_and_every_point_is_tried(tmp_path: Path) -> None:
    plan = _plan()
    result = tune(
        plan,
        [parse_grid("algorithm.lr=0.003,0.3"), parse_grid("fl.local_steps=1,2")],
        out=tmp_path,
        trials=None,
        rounds=None,
        val_fraction=0.2,
        launch=lambda p: launch(p, tmp_path, workers=1),
    )
    assert [row[4] for row in result.rows] == [4]  # completed trials of the one cell
    import optuna

    storage = f"sqlite:///{result.folder / STUDY_FILE}"
    (summary,) = optuna.get_all_study_summaries(storage)
    trials = optuna.load_study(study_name=summary.study_name, storage=storage).trials
    tried = {(t.params["algorithm.lr"], t.params["fl.local_steps"]) for t in trials}
    assert tried == {(0.003, 1), (0.003, 2), (0.3, 1), (0.3, 2)}


def test_a_study_in_use_is_one_line(tmp_path: Path) -> None:
    with study_lock(tmp_path), pytest.raises(FedbenchError, match="study in use"):  # noqa: SIM117
        with study_lock(tmp_path):
            pass
    with study_lock(tmp_path):  # released again
        pass


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (lambda p: p.write_bytes(b"not a database" * 10), "is not an SQLite database"),
        (lambda p: p.mkdir(), "is not a file"),
    ],
)
def test_a_damaged_study_file_is_a_bad_file(tmp_path: Path, make, what: str) -> None:
    path = tmp_path / STUDY_FILE
    make(path)
    with pytest.raises(BadFile, match=what) as caught:
        check_study_file(path)
    assert f"remove {path}" in str(caught.value)


def test_an_sqlite_error_is_one_line_naming_the_store(tmp_path: Path) -> None:
    path = tmp_path / STUDY_FILE
    with pytest.raises(FedbenchError) as caught, study_errors(path):
        raise sqlite3.OperationalError("database or disk is full")
    message = str(caught.value)
    assert message.startswith(f"{path}: the study store failed (OperationalError: database or")
    assert "\n" not in message


def test_a_tuned_column_the_plan_lacks_is_refused(tmp_path: Path) -> None:
    table = parse_table_config(tiny_table_data())
    path = tmp_path / "tuned.yaml"
    rows = {"Local SGD": {"partition.alpha=0.3": {"values": {"algorithm.lr": 0.5}}}}
    path.write_text(yaml.safe_dump({"table": "tiny", "rows": rows}))
    tuned = load_tuned(path, table)
    with pytest.raises(BadFile, match=r"names column 'partition.alpha=0.3', which this run"):
        check_tuned_columns(path, tuned, expand(table, seeds=1))
    rows = {"Local SGD": {"partition.alpha=0.6": {"values": {"algorithm.lr": 0.5}}}}
    path.write_text(yaml.safe_dump({"table": "tiny", "rows": rows}))
    check_tuned_columns(path, load_tuned(path, table), expand(table, seeds=1))
