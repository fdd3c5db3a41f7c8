"""Resuming an interrupted run reproduces the uninterrupted one exactly: metrics.jsonl (but for
elapsed_s) and the final model.

The run is interrupted in-process at a chosen point (deterministic); one slow test kills a real
process with SIGKILL."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch

from fedbench.config import RunConfig, load_run_config
from fedbench.engine import train
from fedbench.engine.loop import Engine
from tests.conftest import read_metrics, strip_elapsed, train_until_checkpoint


class Killed(BaseException):
    """Stands for a kill: not an Exception, so the run is not recorded as failed (no summary)."""


def _config(algorithm: str, rounds: int = 6, *extra: str) -> RunConfig:
    return load_run_config(
        None,
        [
            f"algorithm.name={algorithm}",
            "model.name=logreg",
            "partition.clients=6",
            "fl.participation=0.5",
            f"fl.rounds={rounds}",
            "fl.local_steps=3",
            "fl.batch_size=16",
            "eval.every=1",
            "eval.train_subset=200",
            "runtime.checkpoint_every=2",
            "runtime.device=cpu",
            *extra,
        ],
    )


def _kill_at_checkpoint(monkeypatch: pytest.MonkeyPatch, rounds_done: int, *, saved: bool) -> None:
    """Raise Killed at the checkpoint of `rounds_done`, after writing it or before."""
    original = Engine._checkpoint

    def checkpoint(self: Engine, done: int, elapsed: float) -> None:
        if done == rounds_done and not saved:
            raise Killed
        original(self, done, elapsed)
        if done == rounds_done:
            raise Killed

    monkeypatch.setattr(Engine, "_checkpoint", checkpoint)


def _assert_same_run(resumed: Path, fresh: Path) -> None:
    assert resumed.name == fresh.name
    assert strip_elapsed(read_metrics(resumed)) == strip_elapsed(read_metrics(fresh))
    a = torch.load(resumed / "model.pt", weights_only=True)
    b = torch.load(fresh / "model.pt", weights_only=True)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


#: (algorithm, extra settings) -> what a resume must restore.
CASES = {
    "scaffold": ("scaffold", ()),  # per-client state c_i
    # the lr within a round (cosine over K) and c_i from the summed step sizes
    "scaffold-local-lr": ("scaffold", ("algorithm.lr_schedule_scope=local",)),
    "feddyn": ("feddyn", ("algorithm.alpha=0.1",)),  # per-client grad_i, server h
    "client-dp": (  # the adaptive clip C and the server's noise stream
        "fedavg",
        (
            "privacy.level=client",
            "privacy.adaptive_clip=true",
            "privacy.noise_multiplier=0.5",
            "privacy.count_noise=5",
            "privacy.clip=0.5",
        ),
    ),
    "fedadamw-vectorized": ("fedadamw", ("runtime.engine=vectorized",)),  # v_bar, Delta_G
    "dp_fedadamw": ("dp_fedadamw", ("privacy.noise_multiplier=1.0", "privacy.clip=1.0")),  # noise
}


@pytest.fixture(scope="module")
def fresh_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The uninterrupted run of each case, trained once for the module."""
    out = tmp_path_factory.mktemp("fresh")
    return {
        case: train(_config(alg, 6, *extra), out / case, save_model=True).run_dir
        for case, (alg, extra) in CASES.items()
    }


@pytest.mark.parametrize(
    ("case", "saved"),
    [
        ("scaffold", True),
        ("scaffold", False),
        ("scaffold-local-lr", False),
        ("feddyn", False),
        ("client-dp", True),
        ("fedadamw-vectorized", True),
        ("dp_fedadamw", False),
    ],
    ids=lambda v: {True: "after-checkpoint", False: "before-checkpoint"}.get(v, v),
)
def test_resume_after_interrupt_equals_uninterrupted_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fresh_runs: dict[str, Path],
    case: str,
    saved: bool,
) -> None:
    algorithm, extra = CASES[case]
    cfg = _config(algorithm, 6, *extra)
    with monkeypatch.context() as patch:
        _kill_at_checkpoint(patch, 4, saved=saved)
        with pytest.raises(Killed):
            train(cfg, tmp_path, save_model=True)
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert not (run_dir / "summary.json").exists()
    # Rounds 0..4 are logged; killed before its checkpoint, the last one holds round 2, so the
    # resume truncates rows 3 and 4 and recomputes them.
    assert [row["round"] for row in read_metrics(run_dir)] == [0, 1, 2, 3, 4]
    assert torch.load(run_dir / "checkpoint.pt", weights_only=True)["round"] == (4 if saved else 2)

    result = train(cfg, tmp_path, save_model=True)
    assert result.status == "completed" and not (run_dir / "checkpoint.pt").exists()
    _assert_same_run(result.run_dir, fresh_runs[case])


@pytest.mark.slow
def test_resume_after_a_real_sigkill(tmp_path: Path) -> None:
    """A real process killed with SIGKILL once it has written a checkpoint. Should the run end
    before the signal lands (a very loaded machine), the attempt is repeated with twice the
    rounds: the test fails only when the resumed run differs, never on timing."""
    for rounds in (40, 80, 160):
        args = ["--set", "algorithm.name=scaffold", "--set", "model.name=logreg"]
        args += ["--set", f"fl.rounds={rounds}", "--set", "partition.clients=6"]
        args += ["--set", "fl.participation=0.5", "--set", "fl.local_steps=3"]
        args += ["--set", "eval.every=1", "--set", "eval.train_subset=200"]
        args += ["--set", "runtime.checkpoint_every=1", "--set", "runtime.device=cpu"]
        killed = tmp_path / f"killed{rounds}"
        proc = train_until_checkpoint(args, killed)
        os.kill(proc.pid, signal.SIGKILL)  # the process is not reaped yet: its pid is still ours
        proc.wait()
        (run_dir,) = (killed / "runs").iterdir()
        if not (run_dir / "summary.json").exists():
            break  # the kill landed before the run finished
    else:
        pytest.fail("the run always finished before SIGKILL landed")
    assert proc.returncode == -signal.SIGKILL

    sets = [a for a in args if a != "--set"]
    cfg = load_run_config(None, sets)
    result = train(cfg, killed, save_model=True)
    assert result.status == "completed"
    fresh = train(cfg, tmp_path / "fresh", save_model=True).run_dir
    _assert_same_run(result.run_dir, fresh)
