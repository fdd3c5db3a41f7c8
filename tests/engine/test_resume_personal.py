"""Resuming a run of a personal-model method (Ditto, APFL, Per-FedAvg, pFedMe) after a kill
reproduces the uninterrupted run bit for bit: metrics.jsonl (but for elapsed_s), the final
model, and every client's stored personal state (v_i, alpha_i, theta_i), on the sequential and
the vectorised executor."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedbench.engine import train
from fedbench.engine.loop import Engine
from tests.engine.test_resume import Killed, _assert_same_run, _config, _kill_at_checkpoint

CASES = {
    "ditto": ("ditto", ()),
    "apfl-vectorized": ("apfl", ("runtime.engine=vectorized",)),
    "perfedavg_hf": ("perfedavg_hf", ()),
    "pfedme-vectorized": ("pfedme", ("runtime.engine=vectorized", "algorithm.inner_steps=2")),
}


def _final_states(monkeypatch: pytest.MonkeyPatch) -> dict[int, dict]:
    """Every client's stored state at the end of the run (read when the run writes its
    summary), copied."""
    found: dict[int, dict] = {}
    original = Engine._checkpoint

    def checkpoint(self: Engine, done: int, elapsed: float) -> None:
        original(self, done, elapsed)
        found.clear()
        for client, state in self.client_states.items():
            found[int(client)] = {
                k: [t.clone() for t in v] if isinstance(v, list) else v.clone()
                for k, v in state.items()
            }

    monkeypatch.setattr(Engine, "_checkpoint", checkpoint)
    return found


def _same_states(a: dict[int, dict], b: dict[int, dict], kept: bool) -> None:
    assert a.keys() == b.keys() and bool(a) == kept
    for client in a:
        for key, value in a[client].items():
            other = b[client][key]
            pairs = zip(value, other, strict=True) if isinstance(value, list) else [(value, other)]
            assert all(torch.equal(x, y) for x, y in pairs), (client, key)


@pytest.mark.parametrize("case", sorted(CASES))
def test_personal_methods_resume_bit_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    algorithm, extra = CASES[case]
    cfg = _config(algorithm, 6, *extra, "runtime.checkpoint_every=1")
    with monkeypatch.context() as patch:
        fresh_states = _final_states(patch)
        fresh = train(cfg, tmp_path / "fresh", save_model=True).run_dir
        fresh_states = dict(fresh_states)
    with monkeypatch.context() as patch:
        _kill_at_checkpoint(patch, 3, saved=True)
        with pytest.raises(Killed):
            train(cfg, tmp_path / "killed", save_model=True)
    with monkeypatch.context() as patch:
        resumed_states = _final_states(patch)
        result = train(cfg, tmp_path / "killed", save_model=True)
    assert result.status == "completed"
    _assert_same_run(result.run_dir, fresh)
    # Per-FedAvg keeps no client state (its personalisation happens at evaluation)
    _same_states(resumed_states, fresh_states, kept=not algorithm.startswith("perfedavg"))
