"""eval.per_client: each sampled client's accuracy and loss on its own test data, summarised as
mean / worst 10% / std; local test data held out of training or given by the dataset."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from fedbench.config import load_run_config
from fedbench.data.client_test import hold_out
from fedbench.engine import train
from fedbench.engine.evaluate import evaluate
from fedbench.engine.per_client import summarise
from fedbench.engine.setup import prepare_run
from fedbench.errors import FedbenchError
from tests.conftest import TINY, read_metrics

SETS = [v for i, v in enumerate(TINY) if i % 2 == 1]


def test_hold_out_is_a_seeded_disjoint_split_that_keeps_one_training_sample() -> None:
    parts = [np.arange(0, 10), np.arange(10, 13), np.array([20]), np.arange(30, 50)]
    train_parts, test_parts = hold_out(parts, 0.25, seed=3)
    assert [len(t) for t in test_parts] == [
        3,
        1,
        0,
        5,
    ]  # round(2.5)=3 (half up), 0.75->1, 1 keeps 1
    for part, tr, te in zip(parts, train_parts, test_parts):
        assert np.array_equal(np.sort(np.concatenate([tr, te])), part)
        assert not set(tr) & set(te) and len(tr) >= 1
        assert np.all(np.diff(tr) > 0) and np.all(np.diff(te) > 0)
    again = hold_out(parts, 0.25, seed=3)[1]
    assert all(np.array_equal(a, b) for a, b in zip(again, test_parts))
    # A client's split does not depend on the other clients' sizes.
    assert np.array_equal(hold_out(parts[:2], 0.25, seed=3)[1][1], test_parts[1])


def test_summarise_by_hand() -> None:
    acc = [50.0, 90.0, 70.0, 10.0, 80.0, 60.0, 40.0, 30.0, 20.0, 100.0, 65.0]
    mean, worst, std = summarise(acc, higher_is_better=True)
    # 11 clients: the worst ceil(1.1) = 2 are 10 and 20.
    assert mean == pytest.approx(sum(acc) / 11, abs=1e-12)
    assert worst == pytest.approx(15.0, abs=1e-12)
    assert std == pytest.approx(math.sqrt(sum((a - mean) ** 2 for a in acc) / 11), abs=1e-12)
    loss_mean, loss_worst, _ = summarise([0.5, 2.0, 1.0], higher_is_better=False)
    assert loss_worst == 2.0 and loss_mean == pytest.approx(3.5 / 3, abs=1e-12)


def _hand_per_client(cfg, run_dir, clients):
    """Per-client accuracy/loss of the saved final model, recomputed outside the engine."""
    setup = prepare_run(cfg)
    setup.model.load_state_dict(torch.load(run_dir / "model.pt"))
    split = setup.client_test
    x, y = (
        (setup.data.x_test, setup.data.y_test)
        if split.source == "test"
        else (setup.data.x_train, setup.data.y_train)
    )
    out = []
    for c in clients:
        idx = torch.as_tensor(split.indices[c])
        if len(idx):
            out.append(evaluate(setup.model, x[idx], y[idx], 1024, setup.prepare))
    return setup, out


@pytest.mark.slow
def test_per_client_metrics_on_held_out_training_samples(tmp_path) -> None:
    cfg = load_run_config(
        None, [*SETS, "eval.per_client=true", "partition.client_test_fraction=0.25"]
    )
    result = train(cfg, tmp_path, save_model=True)
    rows = read_metrics(result.run_dir)
    assert all(row["clients_evaluated"] == 3 for row in rows)  # 6 clients x 0.5 per round
    setup = prepare_run(cfg)
    _, hand = _hand_per_client(cfg, result.run_dir, setup.schedule[cfg.fl.rounds - 1])
    accs = [a for a, _ in hand]
    losses = [lo for _, lo in hand]
    final = rows[-1]
    assert final["client_acc_mean"] == pytest.approx(np.mean(accs), abs=1e-9)
    assert final["client_acc_worst10"] == pytest.approx(min(accs), abs=1e-9)  # ceil(0.3) = 1
    assert final["client_acc_std"] == pytest.approx(np.std(accs), abs=1e-9)
    assert final["client_loss_mean"] == pytest.approx(np.mean(losses), abs=1e-9)
    assert final["client_loss_worst10"] == pytest.approx(max(losses), abs=1e-9)
    # Held-out samples are not trained on: the clients' training sets shrank by the test sets.
    for trained, held in zip(setup.clients, setup.client_test.indices):
        assert len(held) and not set(trained.tolist()) & set(held.tolist())


@pytest.mark.slow
def test_a_dataset_with_per_client_test_splits_is_used_as_given(tmp_path, monkeypatch) -> None:
    """Dataset.client_test (e.g. LEAF's per-user test data) wins over any hold-out."""
    import fedbench.data.validation as validation  # run_data: where a run's data is loaded

    real_load = validation.load_dataset

    def with_client_test(data_cfg):
        data = real_load(data_cfg)
        n = len(data.y_test)
        return replace(data, client_test=[torch.arange(c, n, 6) for c in range(6)])

    monkeypatch.setattr(validation, "load_dataset", with_client_test)
    cfg = load_run_config(None, [*SETS, "eval.per_client=true", "partition.kind=iid"])
    result = train(cfg, tmp_path, save_model=True)
    setup = prepare_run(cfg)
    assert setup.client_test.source == "test"
    _, hand = _hand_per_client(cfg, result.run_dir, setup.schedule[cfg.fl.rounds - 1])
    final = read_metrics(result.run_dir)[-1]
    assert final["client_acc_mean"] == pytest.approx(np.mean([a for a, _ in hand]), abs=1e-9)
    with pytest.raises(FedbenchError, match="has its own per-client test splits"):
        prepare_run(load_run_config(None, [*SETS, "partition.client_test_fraction=0.2"]))


def test_per_client_without_local_test_data_is_a_user_error(run_cli, tmp_path) -> None:
    code, _, err = run_cli("train", *TINY, "--set", "eval.per_client=true", "--out", str(tmp_path))
    assert code == 2 and "set partition.client_test_fraction (e.g. 0.2)" in err
    assert not (tmp_path / "runs").exists()
