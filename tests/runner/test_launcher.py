"""The local launcher: slots per (pretend) GPU, the retry/wait policy, and fault injection with
real processes and real signals: a worker SIGKILLed mid-run, the whole sweep SIGKILLed, and two
sweeps into the same --out at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

import fedbench.threads
from fedbench.config import load_run_config
from fedbench.engine import train
from fedbench.runner.launcher import MAX_ATTEMPTS, Outcome, RunQueue, launch, local_slots
from fedbench.runner.table_config import expand, parse_table_config
from tests.conftest import read_metrics, strip_elapsed, tiny_table_data

ROUNDS = 12


def test_slots_pack_runs_per_gpu_and_fall_back_to_cores(monkeypatch):
    monkeypatch.setattr(fedbench.threads, "others_running", lambda: 0)  # a quiet machine
    assert local_slots(None, 2, ["0", "1"]) == ["0", "1", "0", "1"]
    assert local_slots(3, 2, ["0", "1"]) == ["0", "1", "0"]  # both GPUs before doubling up
    assert local_slots(None, 1, ["0"]) == ["0"]
    assert local_slots(2, 4, []) == [None, None]  # runs_per_gpu means nothing without a GPU
    assert local_slots(None, 1, []) == [None] * (os.cpu_count() or 1)


@pytest.mark.parametrize(("others", "per_core"), [(None, 1), (0, 1), (1, 1), (2, 2), (9, 2)])
def test_a_sweep_on_a_machine_other_jobs_hold_starts_two_workers_per_core(
    monkeypatch, others, per_core
):
    """Beside b busy jobs, w workers get w / (w + b) of the cores: on 2 cores with two busy
    jobs, 4 workers keep 2/3 of them where 2 keep half."""
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(fedbench.threads, "others_running", lambda: others)
    assert local_slots(None, 1, []) == [None] * (2 * per_core)
    assert local_slots(3, 1, []) == [None] * 3  # --workers is kept


def test_the_queue_retries_a_failure_once_and_waits_for_busy_runs():
    plan = expand(parse_table_config(tiny_table_data()))
    first, second = plan.runs[0], plan.runs[1]
    queue = RunQueue([first, second])
    task = queue.pop()
    assert queue.settle(task, Outcome(first.run_id, "busy")) == "wait"
    assert [(t.run.run_id, t.wait) for t in queue.todo] == [
        (second.run_id, False),
        (first.run_id, True),  # behind the runs nobody else holds
    ]
    task = queue.pop()
    assert queue.settle(task, Outcome(second.run_id, "failed", "boom")) == "retry"
    retry = queue.todo[-1]
    assert retry.run is second and retry.attempt == 2 and not retry.wait
    queue.pop()  # the waiting first run
    assert queue.settle(queue.pop(), Outcome(second.run_id, "failed", "boom")) == "done"
    assert queue.outcomes[second.run_id].attempts == MAX_ATTEMPTS
    assert not queue


@pytest.mark.slow
def test_runs_per_gpu_packs_worker_processes_on_one_pretend_gpu(tmp_path: Path):
    data = tiny_table_data()
    data["base"]["runtime"]["runs_per_gpu"] = 2
    data["seeds"] = [0]
    plan = expand(parse_table_config(data))  # 2 runs, on CPU, "GPU 0" only in the environment
    outcomes = launch(plan, tmp_path, gpus=["0"])
    assert [o.status for o in outcomes.values()] == ["completed", "completed"]
    assert [o.gpu for o in outcomes.values()] == ["0", "0"]
    pids = {
        json.loads((tmp_path / "runs" / r / "attempt.json").read_text())["pid"] for r in outcomes
    }
    assert len(pids) == 2 and os.getpid() not in pids  # two worker processes shared the GPU


def fault_table(tmp_path: Path, seeds: list[int]) -> Path:
    """Runs of a few seconds that checkpoint every round."""
    data = tiny_table_data()
    data["base"]["model"] = {"name": "cnn"}
    data["base"]["partition"]["clients"] = 6
    data["base"]["fl"] = {
        "rounds": ROUNDS,
        "participation": 0.5,
        "local_steps": 5,
        "batch_size": 16,
    }
    data["base"]["runtime"]["checkpoint_every"] = 1
    data["methods"] = {"FedAdamW": {"algorithm": {"name": "fedadamw", "alpha": 0.5}}}
    data["seeds"] = seeds
    path = tmp_path / "fault.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def sweep_command(table: Path, out: Path, workers: int) -> list[str]:
    command = [sys.executable, "-m", "fedbench", "run", str(table), "--out", str(out)]
    return [*command, "--workers", str(workers)]


def attempts(run_dir: Path) -> int:
    return json.loads((run_dir / "attempt.json").read_text())["attempts"]


def checkpointed_round(run_dir: Path) -> int:
    try:
        return json.loads((run_dir / "checkpoint.json").read_text())["round"] or 0
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


def poll(condition, seconds: float = 300):
    deadline = time.time() + seconds
    while time.time() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    return None


def undisturbed_metrics(run_dir: Path, out: Path, threads: int) -> list[dict]:
    # The worker's thread count (same float summation order), asked for as a setting: left to
    # `auto`, the count depends on what this process set before (fedbench.engine.layout).
    cfg = load_run_config(run_dir / "config.yaml", [f"runtime.threads={threads}"])
    before = torch.get_num_threads()
    try:
        result = train(cfg, out)
    finally:
        torch.set_num_threads(before)
    return strip_elapsed(read_metrics(result.run_dir))


@pytest.mark.slow
def test_a_worker_killed_mid_run_is_retried_and_ends_as_if_undisturbed(tmp_path: Path):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        sweep_command(fault_table(tmp_path, [0, 1]), out, workers=2),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def kill_a_worker_mid_run() -> Path | None:
        for run_dir in sorted(out.glob("runs/*")):
            if checkpointed_round(run_dir) >= 3 and not (run_dir / "summary.json").exists():
                pid = json.loads((run_dir / "attempt.json").read_text())["pid"]
                os.kill(pid, signal.SIGKILL)
                return run_dir
        return None

    victim = poll(kill_a_worker_mid_run)
    stdout, stderr = proc.communicate(timeout=600)
    assert victim is not None, "no run reached round 3"
    assert proc.returncode == 0, stderr
    assert "worker process died (killed by SIGKILL); retrying once" in stdout
    assert attempts(victim) == 2
    assert json.loads((victim / "summary.json").read_text())["status"] == "completed"
    threads = max(1, (os.cpu_count() or 1) // 2)
    assert strip_elapsed(read_metrics(victim)) == undisturbed_metrics(
        victim, tmp_path / "ref", threads
    )


@pytest.mark.slow
def test_a_killed_sweep_reruns_without_repeating_finished_runs(tmp_path: Path):
    out = tmp_path / "out"
    command = sweep_command(fault_table(tmp_path, [0, 1]), out, workers=1)
    proc = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )

    def one_finished_one_midway() -> tuple[Path, Path] | None:
        runs = sorted(out.glob("runs/*"))
        done = [r for r in runs if (r / "summary.json").exists()]
        midway = [r for r in runs if checkpointed_round(r) >= 2 and r not in done]
        return (done[0], midway[0]) if done and midway else None

    found = poll(one_finished_one_midway)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and anything it started
    proc.wait()
    assert found is not None, "the sweep never got halfway"
    finished, interrupted = found
    mtime = (finished / "summary.json").stat().st_mtime_ns

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr
    assert (finished / "summary.json").stat().st_mtime_ns == mtime and attempts(finished) == 1
    assert attempts(interrupted) == 2  # resumed once, from its checkpoint
    for run_dir in (finished, interrupted):
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "completed"
        assert [row["round"] for row in read_metrics(run_dir)] == list(range(ROUNDS + 1))


@pytest.mark.slow
def test_two_sweeps_into_one_out_train_every_run_once(tmp_path: Path):
    out = tmp_path / "out"
    command = sweep_command(fault_table(tmp_path, [0, 1]), out, workers=1)
    procs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = [proc.communicate(timeout=600) for proc in procs]
    for proc, (_, stderr) in zip(procs, results):
        assert proc.returncode == 0, stderr
    run_dirs = sorted(out.glob("runs/*"))
    assert len(run_dirs) == 2
    for run_dir in run_dirs:
        assert attempts(run_dir) == 1  # trained by exactly one of the two sweeps
        assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"
        assert [row["round"] for row in read_metrics(run_dir)] == list(range(ROUNDS + 1))
    assert not list(out.rglob("*.tmp"))
    plan = json.loads((out / "tiny" / "plan.json").read_text())
    assert {run["status"] for run in plan["runs"]} == {"completed"}


def test_a_worker_leaves_with_its_exit_handlers_run_and_its_streams_flushed(tmp_path: Path):
    """A worker's exit skips the interpreter's teardown of torch (`os._exit`), but not what a
    logger or plugin registered with atexit, nor output still in the buffers."""
    marker = tmp_path / "handler-ran"
    code = (
        "import atexit, sys\n"
        "from fedbench.runner.launcher import _leave\n"
        f"atexit.register(lambda: open({str(marker)!r}, 'w').write('yes'))\n"
        "sys.stdout.write('buffered, no newline')\n"
        "_leave()\n"
        "print('never reached')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "buffered, no newline"
    assert marker.read_text() == "yes"
