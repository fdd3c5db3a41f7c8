"""A round's clients over several processes (fedbench.engine.client_pool): bitwise the
one-process run at the same threads, for client states (SCAFFOLD's c_i, FedAdamW's stores and
moments, client-level DP's clip and noise) and diagnostics; a killed client process ends the
run with a clear error and the run resumes exactly, as it does after a SIGKILL of the run's
own process."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
import torch

from fedbench.config import RunConfig, load_run_config
from fedbench.engine import train
from fedbench.engine.client_pool import ClientPool, ClientProcessError
from tests.conftest import read_metrics, strip_elapsed, train_until_checkpoint

pytestmark = pytest.mark.engine

BASE = [
    "data.name=digits",
    "model.name=cnn",
    "partition.clients=8",
    "fl.participation=0.5",
    "fl.rounds=4",
    "fl.local_steps=3",
    "fl.batch_size=16",
    "eval.every=1",
    "eval.train_subset=200",
    "runtime.device=cpu",
    "runtime.threads=1",
]

CASES = {
    "fedavg": ["algorithm.name=fedavg"],
    "scaffold": ["algorithm.name=scaffold"],  # per-client c_i, stored in this process
    # FedAdamW's local moments (read by client_end) and its diagnostics (block means of v)
    "fedadamw-diagnostics": ["algorithm.name=fedadamw", "eval.diagnostics=true"],
    "client-dp": [
        "algorithm.name=fedavg",
        "privacy.level=client",
        "privacy.adaptive_clip=true",
        "privacy.noise_multiplier=0.5",
        "privacy.count_noise=5",
        "privacy.clip=0.5",
    ],
}


def _config(case: str, processes: int, *extra: str) -> RunConfig:
    return load_run_config(
        None, [*BASE, *CASES[case], f"runtime.client_processes={processes}", *extra]
    )


def _assert_same_run(a: Path, b: Path) -> None:
    assert strip_elapsed(read_metrics(a)) == strip_elapsed(read_metrics(b))
    x = torch.load(a / "model.pt", weights_only=True)
    y = torch.load(b / "model.pt", weights_only=True)
    assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


@pytest.mark.parametrize("case", sorted(CASES))
def test_clients_over_processes_are_bitwise_the_one_process_run(
    case: str, tmp_path: Path, fresh_process: bool
) -> None:
    if fresh_process:
        return
    one = train(_config(case, 1), tmp_path / "one", save_model=True)
    three = train(_config(case, 3), tmp_path / "three", save_model=True)
    assert one.status == three.status == "completed"
    assert one.run_dir.name == three.run_dir.name  # a speed setting: the same run id
    assert one.summary["plan"]["client_processes"]["value"] == "1"
    assert three.summary["plan"]["client_processes"]["value"] == "3"
    assert one.summary["torch_threads"] == three.summary["torch_threads"] == 1
    _assert_same_run(one.run_dir, three.run_dir)


def test_a_killed_client_process_is_an_error_and_the_run_resumes_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_process: bool
) -> None:
    if fresh_process:
        return
    cfg = _config("scaffold", 2, "runtime.checkpoint_every=1")
    original = ClientPool.train
    rounds = []

    def kill_in_round_three(self: ClientPool, *args, **kwargs):
        rounds.append(1)
        if len(rounds) == 3:
            os.kill(self.processes[0].process.pid, signal.SIGKILL)
        return original(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(ClientPool, "train", kill_in_round_three)
        with pytest.raises(ClientProcessError, match=r"died .*SIGKILL.*start the run again"):
            train(cfg, tmp_path / "killed", save_model=True)
    (run_dir,) = (tmp_path / "killed" / "runs").iterdir()
    assert torch.load(run_dir / "checkpoint.pt", weights_only=True)["round"] == 2
    resumed = train(cfg, tmp_path / "killed", save_model=True)
    assert resumed.status == "completed"
    fresh = train(_config("scaffold", 1), tmp_path / "fresh", save_model=True)
    _assert_same_run(resumed.run_dir, fresh.run_dir)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc (Linux)")
def test_a_sigkill_of_the_runs_process_ends_its_client_processes_and_resumes_exactly(
    tmp_path: Path, fresh_process: bool
) -> None:
    """The run's own process killed once it has a checkpoint: its client processes end (their
    pipe closes), and the run resumes to the uninterrupted one. Should the run end before the
    signal lands (a very loaded machine), the attempt is repeated with more rounds."""
    if fresh_process:
        return
    for rounds in (30, 60, 120):
        sets = [*BASE, *CASES["scaffold"], "runtime.client_processes=2"]
        sets += [f"fl.rounds={rounds}", "runtime.checkpoint_every=1"]
        killed = tmp_path / f"killed{rounds}"
        args = [a for s in sets for a in ("--set", s)]
        proc = train_until_checkpoint(args, killed)
        children = _children(proc.pid) if proc.poll() is None else []
        os.kill(proc.pid, signal.SIGKILL)  # not reaped yet: the pid is still ours
        proc.wait()
        (run_dir,) = (killed / "runs").iterdir()
        if not (run_dir / "summary.json").exists():
            break
    else:
        pytest.fail("the run always finished before SIGKILL landed")
    assert children, "the run trained in one process"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(_gone(pid) for pid in children):
        time.sleep(0.05)
    assert all(_gone(pid) for pid in children)
    resumed = train(load_run_config(None, sets), killed, save_model=True)
    assert resumed.status == "completed"
    alone = [*BASE, *CASES["scaffold"], "runtime.client_processes=1", f"fl.rounds={rounds}"]
    fresh = train(load_run_config(None, alone), tmp_path / "fresh", save_model=True)
    assert fresh.run_dir.name == resumed.run_dir.name
    _assert_same_run(resumed.run_dir, fresh.run_dir)


def test_an_error_in_a_client_process_ends_the_run_with_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_process: bool
) -> None:
    if fresh_process:
        return
    import fedbench.engine.client_pool as client_pool

    def broken(*args, **kwargs):
        raise ValueError("a step that cannot run")

    # Patched before the processes are forked: they train with it, this process does not.
    monkeypatch.setattr(client_pool, "run_client", broken)
    with pytest.raises(ClientProcessError, match=r"(?s)failed:.*ValueError: a step that cannot"):
        train(_config("fedavg", 2), tmp_path)
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "failed"
