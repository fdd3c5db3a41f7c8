"""The Python API refuses wrong types with a FedbenchError naming the argument (a string where a
list belongs is never read letter by letter)."""

from __future__ import annotations

from pathlib import Path

import pytest

import fedbench


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda out: fedbench.train(None, out), "config takes a RunConfig"),
        (lambda out: fedbench.train(fedbench.load_config(), out=None), "out takes a path"),
        (lambda out: fedbench.train({}, out, save_model="yes"), "save_model takes True or False"),
        (lambda out: fedbench.run_table("table1", seeds="2", out=out), "seeds takes a number"),
        (lambda out: fedbench.run_table("table1", seeds=[0, "1"], out=out), "seeds takes"),
        (
            lambda out: fedbench.run_table("table1", methods="FedAvg", out=out),
            "methods takes a list",
        ),
        (lambda out: fedbench.run_table(7, out=out), "name takes a table"),
        (lambda out: fedbench.run_table("table1", workers="2", out=out), "workers takes an int"),
        (lambda out: fedbench.load_config(overrides="fl.rounds=3"), "overrides takes a list"),
        (lambda out: fedbench.load_config(overrides=[3]), "every item of overrides takes a str"),
        (lambda out: fedbench.load_config(5), "path takes a path"),
        (lambda out: fedbench.make_report(3), "folder takes a path"),
        (lambda out: fedbench.make_report(out, metrics="client_drift"), "metrics takes a list"),
    ],
)
def test_a_wrong_type_is_a_fedbench_error_naming_the_argument(tmp_path: Path, call, names: str):
    with pytest.raises(fedbench.FedbenchError, match=names):
        call(tmp_path)
    assert not (tmp_path / "runs").exists()


def test_the_right_types_still_pass():
    cfg = fedbench.load_config(overrides=("fl.rounds=3",), fl={"local_steps": 2})
    assert (cfg.fl.rounds, cfg.fl.local_steps) == (3, 2)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda out: fedbench.load_config("a\x00b.yaml"), "path 'a\\x00b.yaml' holds a NUL"),
        (lambda out: fedbench.make_report(f"{out}/x\x00"), "folder '"),
        (lambda out: fedbench.train(fedbench.load_config(), out=f"{out}\x00"), "out '"),
    ],
)
def test_a_path_with_a_nul_is_a_fedbench_error_naming_it(tmp_path: Path, call, message: str):
    """The API given a path with a NUL raised the OS layer's bare ValueError."""
    with pytest.raises(fedbench.FedbenchError) as caught:
        call(tmp_path)
    assert str(caught.value).startswith(message) and "holds a NUL character" in str(caught.value)


@pytest.mark.parametrize("workers", [-1, 0])
def test_a_worker_count_below_one_is_a_fedbench_error(tmp_path: Path, tiny_table_path, workers):
    """`run_table(workers=-1)` raised ZeroDivisionError in the launcher (no slot to divide the
    cores among); the API and the launcher name the value."""
    from fedbench.runner.launcher import launch
    from fedbench.runner.sweep import make_plan

    with pytest.raises(fedbench.FedbenchError, match=f"not {workers}$"):
        fedbench.run_table(str(tiny_table_path), workers=workers, out=tmp_path)
    assert not (tmp_path / "runs").exists()
    plan = make_plan(str(tiny_table_path), "table")
    with pytest.raises(
        fedbench.FedbenchError, match=f"workers must be at least 1 .* not {workers}"
    ):
        launch(plan, tmp_path, workers=workers)
