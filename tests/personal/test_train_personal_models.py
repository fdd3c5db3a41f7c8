"""The personal-model methods (Ditto, APFL, Per-FedAvg FO/HF, pFedMe) end to end through the
engine, with the protocol's columns: both executors agree, their personalised models are the
ones the columns test, and a kill/resume with the store spilled to disk reproduces the
uninterrupted run bit for bit (metrics with the personal columns, final model, and every
client's stored v_i / alpha_i / theta_i)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedbench.engine import train
from fedbench.engine.loop import Engine
from tests.conftest import read_metrics, strip_elapsed
from tests.personal import test_train

#: Each method with the settings its quick run needs (test_train.config: cnn, digits,
#: Dirichlet 0.1, 8 clients, 2 of them unseen).
MINE: dict[str, tuple[str, ...]] = {
    "ditto": ("algorithm.lr=0.05", "algorithm.lam=0.1"),
    "apfl": ("algorithm.lr=0.05",),
    "perfedavg": ("algorithm.lr=0.05", "algorithm.inner_lr=0.02"),
    "perfedavg_hf": ("algorithm.lr=0.05", "algorithm.inner_lr=0.02"),
    "pfedme": ("algorithm.lr=0.05", "algorithm.lam=5", "algorithm.inner_steps=2"),
}


@pytest.mark.parametrize("method", sorted(MINE))
def test_method_runs_on_both_executors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    monkeypatch.setitem(test_train.METHODS, method, MINE[method])
    test_train.test_method_runs_on_both_executors(tmp_path, method)


class Killed(BaseException):
    """Stands for a kill (not an Exception: the run is not recorded as failed)."""


def _copy(state: dict) -> dict:
    return {
        k: [t.clone() for t in v] if isinstance(v, list) else v.clone() for k, v in state.items()
    }


def _watch_states(monkeypatch: pytest.MonkeyPatch, kill_at: int | None) -> dict[int, dict]:
    """Every client's stored state at each checkpoint (the last one the run wrote), copied;
    with `kill_at`, a kill right after that round's checkpoint."""
    found: dict[int, dict] = {}
    original = Engine._checkpoint

    def checkpoint(self: Engine, done: int, elapsed: float) -> None:
        original(self, done, elapsed)
        found.clear()
        found.update({int(c): _copy(s) for c, s in self.client_states.items()})
        if done == kill_at:
            raise Killed

    monkeypatch.setattr(Engine, "_checkpoint", checkpoint)
    return found


@pytest.mark.parametrize(
    ("method", "engine"),
    [
        ("ditto", "sequential"),
        ("apfl", "vectorized"),
        ("pfedme", "vectorized"),
        ("perfedavg_hf", "sequential"),
    ],
)
def test_resume_with_spilled_store_is_bit_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str, engine: str
) -> None:
    extra = (*MINE[method], f"runtime.engine={engine}", "runtime.client_state_memory=0.3")
    cfg = test_train.config(method, *extra, "fl.rounds=6")
    with monkeypatch.context() as patch:
        fresh_states = _watch_states(patch, None)
        fresh = train(cfg, tmp_path / "fresh", save_model=True).run_dir
        fresh_states = dict(fresh_states)
    with monkeypatch.context() as patch:
        _watch_states(patch, 2)
        with pytest.raises(Killed):
            train(cfg, tmp_path / "killed", save_model=True)
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
    # Per-FedAvg keeps nothing per client (its personalisation is the evaluation's step)
    assert bool(fresh_states) == (not method.startswith("perfedavg"))
    assert resumed_states.keys() == fresh_states.keys()
    for client, state in fresh_states.items():
        for key, value in state.items():
            other = resumed_states[client][key]
            pairs = zip(value, other, strict=True) if isinstance(value, list) else [(value, other)]
            assert all(torch.equal(x, y) for x, y in pairs), (client, key)
