"""data.val_fraction: a validation split held out of the training data, never the test set."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedbench.data.base import Dataset
from fedbench.data.validation import holdout_validation
from fedbench.errors import FedbenchError


def _data(n: int = 50) -> Dataset:
    x = torch.arange(n, dtype=torch.float64).unsqueeze(1)
    return Dataset(
        name="toy",
        x_train=x,
        y_train=torch.arange(n) % 5,
        x_test=torch.full((7, 1), -1.0, dtype=torch.float64),
        y_test=torch.zeros(7, dtype=torch.int64),
        num_classes=5,
        client_train=np.arange(n) % 3,
    )


def test_split_moves_a_seeded_fraction_of_training_samples_to_evaluation() -> None:
    data = holdout_validation(_data(), 0.2, seed=4)
    assert data.n_train == 40 and data.x_test.shape[0] == 10
    train = set(data.x_train.flatten().tolist())
    val = set(data.x_test.flatten().tolist())
    assert not train & val and train | val == set(range(50))  # a partition of the training set
    assert -1.0 not in val  # the test set is gone, not mixed in
    # Labels and natural client ids travel with their samples.
    assert torch.equal(data.y_train, data.x_train.flatten().long() % 5)
    assert np.array_equal(data.client_train, data.x_train.flatten().long().numpy() % 3)
    # Seeded: the same split every time, another one for another seed.
    again = holdout_validation(_data(), 0.2, seed=4)
    other = holdout_validation(_data(), 0.2, seed=5)
    assert torch.equal(again.x_test, data.x_test)
    assert not torch.equal(other.x_test, data.x_test)


def test_zero_fraction_is_the_dataset_itself() -> None:
    data = _data()
    assert holdout_validation(data, 0.0, seed=0) is data


@pytest.mark.parametrize("fraction", [0.001, 0.999])
def test_a_fraction_leaving_an_empty_split_is_a_clear_error(fraction: float) -> None:
    with pytest.raises(FedbenchError, match="val_fraction"):
        holdout_validation(_data(), fraction, seed=0)


def _calls_of(name: str) -> set[str]:
    """`module:function` of every call to `name` in the fedbench package."""
    import ast
    from pathlib import Path

    import fedbench

    root = Path(fedbench.__file__).parent
    found = set()
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Call):
                    callee = node.func
                    called = callee.id if isinstance(callee, ast.Name) else None
                    if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name):
                        # fedbench's own module-qualified call, not datasets.load_dataset (GLUE)
                        called = callee.attr if callee.value.id in {"base", "data"} else None
                    if called == name:
                        found.add(f"{path.relative_to(root).as_posix()}:{func.name}")
    return found


def test_run_data_is_the_one_place_that_loads_a_runs_data() -> None:
    # Every path that trains or evaluates a run gets its data from run_data, which holds out
    # the validation split; the preflight only checks that the files are there.
    assert _calls_of("load_dataset") == {
        "data/validation.py:run_data",
        "runner/preflight.py:check_plan",
    }


def _rows(x: torch.Tensor) -> set[bytes]:
    return {row.numpy().tobytes() for row in x.reshape(len(x), -1).double()}


@pytest.mark.slow
def test_a_tuning_trial_never_evaluates_on_the_test_set(tmp_path, monkeypatch) -> None:
    """Every evaluation of every trial of `fedbench tune` is on held-out training samples:
    none of the test set's own samples (those not also in the training set) is ever seen."""
    import yaml

    import fedbench.engine.loop as loop
    from fedbench.config import load_run_config
    from fedbench.data.base import load_dataset
    from fedbench.runner.launcher import launch
    from fedbench.runner.table_config import expand, parse_table_config
    from fedbench.runner.tune import parse_grid, tune
    from tests.conftest import tiny_table_data

    table = tiny_table_data()
    table["methods"] = {"Local SGD": table["methods"]["Local SGD"]}
    table["base"]["fl"]["rounds"] = 1
    full = load_dataset(load_run_config(None, ["data.name=digits"]).data)
    train_rows, test_rows = _rows(full.x_train), _rows(full.x_test)
    test_only = test_rows - train_rows
    assert len(test_only) > 300  # digits' test set is mostly its own samples

    evaluated: list[torch.Tensor] = []
    real = loop.evaluate

    def spy(model, x, *args, **kwargs):
        evaluated.append(x.detach().cpu().clone())
        return real(model, x, *args, **kwargs)

    monkeypatch.setattr(loop, "evaluate", spy)
    plan = expand(parse_table_config(yaml.safe_load(yaml.safe_dump(table))), seeds=1)
    tune(
        plan,
        [parse_grid("algorithm.lr=0.01,0.1")],
        out=tmp_path,
        trials=None,
        rounds=None,
        val_fraction=0.1,
        launch=lambda p: launch(p, tmp_path, workers=1),
        pruner="none",
    )
    assert evaluated, "no evaluation ran"
    n_val = round(0.1 * full.n_train)
    seen_val = False
    for x in evaluated:
        rows = _rows(x)
        assert not rows & test_only, "a tuning trial evaluated on the test set"
        assert rows <= train_rows
        seen_val |= len(x) == n_val
    assert seen_val  # the validation split itself was evaluated (train_loss uses a subset)


def test_prepare_run_trains_on_the_rest_and_evaluates_on_the_held_out_samples() -> None:
    from fedbench.config import load_run_config
    from fedbench.data.base import load_dataset
    from fedbench.engine.setup import prepare_run

    cfg = load_run_config(
        None,
        ["data.name=digits", "model.name=logreg", "data.val_fraction=0.2", "runtime.device=cpu"],
    )
    full = load_dataset(cfg.data)
    setup = prepare_run(cfg)
    n_val = round(0.2 * full.n_train)
    assert len(setup.data.x_test) == n_val
    assert setup.data.n_train == full.n_train - n_val
    assert sum(setup.client_sizes) <= setup.data.n_train
    train, val = _rows(setup.data.x_train), _rows(setup.data.x_test)
    assert val <= _rows(full.x_train)
    assert not val & (_rows(full.x_test) - _rows(full.x_train))
    # The same split as holdout_validation makes, seeded by partition.seed.
    expected = holdout_validation(full, 0.2, cfg.partition.seed)
    assert torch.equal(setup.data.x_test.cpu(), expected.x_test)
    assert len(train) > 0
