"""Every split-model method resumes bit-exactly after a kill: each client's kept part (and
FedBN's statistics) comes back from the checkpoint, so the resumed run's metrics (the
personalised columns included) and final model equal an uninterrupted run's."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from fedbench.config import RunConfig, load_run_config
from fedbench.engine import train
from tests.conftest import read_metrics, train_until_checkpoint
from tests.engine.test_resume import Killed, _assert_same_run, _kill_at_checkpoint


def _settings(name: str, engine: str) -> list[str]:
    return [
        f"algorithm.name={name}",
        f"model.name={'cnn_bn' if name == 'fedbn' else 'cnn'}",
        "data.augment=false",
        "partition.clients=6",
        "partition.client_test_fraction=0.2",
        "fl.participation=0.5",
        "fl.rounds=6",
        "fl.local_steps=3",
        "fl.batch_size=16",
        "eval.every=2",
        "eval.train_subset=200",
        "runtime.checkpoint_every=2",
        "runtime.device=cpu",
        f"runtime.engine={engine}",
        "algorithm.finetune_steps=2",
    ]


def _config(name: str, engine: str) -> RunConfig:
    return load_run_config(None, _settings(name, engine))


@pytest.mark.parametrize(
    ("name", "engine", "saved"),
    [
        ("fedper", "sequential", False),
        ("fedrep", "vectorized", True),
        ("lg_fedavg", "vectorized", False),
        ("fedbabu", "sequential", True),
        ("fedbn", "sequential", False),
        ("fedbn", "vectorized", True),
    ],
)
def test_resume_after_interrupt_equals_uninterrupted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, engine: str, saved: bool
) -> None:
    cfg = _config(name, engine)
    fresh = train(cfg, tmp_path / "fresh", save_model=True).run_dir
    with monkeypatch.context() as patch:
        _kill_at_checkpoint(patch, 4, saved=saved)
        with pytest.raises(Killed):
            train(cfg, tmp_path / "killed", save_model=True)
    result = train(cfg, tmp_path / "killed", save_model=True)
    assert result.status == "completed"
    _assert_same_run(result.run_dir, fresh)
    last = read_metrics(fresh)[-1]
    assert last["personal_acc_mean"] is not None  # the compared rows hold the personal columns


@pytest.mark.slow
def test_fedrep_resumes_after_a_real_sigkill(tmp_path: Path) -> None:
    settings = _settings("fedrep", "sequential")
    args = [a for s in settings for a in ("--set", s)]
    killed = tmp_path / "killed"
    proc = train_until_checkpoint(args, killed)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    (run_dir,) = (killed / "runs").iterdir()
    if (run_dir / "summary.json").exists():
        pytest.skip("the run finished before SIGKILL landed (a very fast machine)")
    cfg = load_run_config(None, settings)
    result = train(cfg, killed, save_model=True)
    fresh = train(cfg, tmp_path / "fresh", save_model=True).run_dir
    _assert_same_run(result.run_dir, fresh)
