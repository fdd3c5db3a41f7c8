"""FedRoD end to end through the engine: both executors agree on the protocol's columns, its
clients' stored states hold their partition's class counts, sample-level DP is refused, and a
kill/resume with the store spilled to disk reproduces the uninterrupted run bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from fedbench.engine import train
from fedbench.engine.setup import prepare_run
from fedbench.errors import FedbenchError
from fedbench.personal.methods.fedrod import log_counts
from tests.conftest import read_metrics, strip_elapsed
from tests.personal import test_train
from tests.personal.test_train_personal_models import Killed, _watch_states

SETTINGS = ("algorithm.lr=0.05",)


def test_fedrod_runs_on_both_executors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(test_train.METHODS, "fedrod", SETTINGS)
    test_train.test_method_runs_on_both_executors(tmp_path, "fedrod")


def test_sample_level_dp_is_refused() -> None:
    cfg = test_train.config("fedrod", *SETTINGS, "privacy.noise_multiplier=1.0")
    with pytest.raises(FedbenchError, match="class counts"):
        prepare_run(cfg)


@pytest.mark.parametrize("engine", ["sequential", "vectorized"])
def test_resume_with_spilled_store_is_bit_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    extra = (*SETTINGS, f"runtime.engine={engine}", "runtime.client_state_memory=0.001")
    cfg = test_train.config("fedrod", *extra, "fl.rounds=6")
    with monkeypatch.context() as patch:
        fresh_states = _watch_states(patch, None)
        fresh = train(cfg, tmp_path / "fresh", save_model=True).run_dir
        fresh_states = dict(fresh_states)
    with monkeypatch.context() as patch:
        _watch_states(patch, 2)
        with pytest.raises(Killed):
            train(cfg, tmp_path / "killed", save_model=True)
    assert any((tmp_path / "killed").rglob("client_states/*")), "the store did not spill"
    with monkeypatch.context() as patch:
        resumed_states = _watch_states(patch, None)
        resumed = train(cfg, tmp_path / "killed", save_model=True)
    assert resumed.status == "completed"
    rows = strip_elapsed(read_metrics(resumed.run_dir))
    assert rows == strip_elapsed(read_metrics(fresh))
    assert rows[-1]["personal_acc_mean"] is not None
    a = torch.load(resumed.run_dir / "model.pt", weights_only=True)
    b = torch.load(fresh / "model.pt", weights_only=True)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert fresh_states and resumed_states.keys() == fresh_states.keys()
    # each client's state holds its own training counts and a personal head that trained
    setup = prepare_run(cfg)
    labels = setup.data.y_train.cpu().numpy()
    for client, state in fresh_states.items():
        counts = np.bincount(labels[setup.partition_arrays[client]], minlength=10)
        want = torch.as_tensor(log_counts(counts), dtype=state["log_counts"].dtype)
        assert torch.equal(state["log_counts"], want), client
        assert state["head"][0].abs().sum() > 0
        other = resumed_states[client]
        assert torch.equal(other["log_counts"], state["log_counts"])
        assert all(torch.equal(x, y) for x, y in zip(state["head"], other["head"], strict=True))
