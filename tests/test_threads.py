"""fedbench.threads: the thread count chosen from the free cores, the passive OpenMP wait policy,
runtime.threads and summary.json's `threads` (none of it timed: benchmarks/shared_machine.py
measures the speed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fedbench import threads
from fedbench.config import RunConfig, parse_run_config
from fedbench.threads import ThreadChoice, choose_threads, passive_wait_policy, threads_for_run
from tests.conftest import cli_env


@pytest.mark.parametrize(
    ("cores", "load", "workers", "expected"),
    [
        (2, 0.1, 1, 2),  # quiet: every core
        (2, 0.49, 1, 2),  # a core half in use still counts as free
        (2, 0.6, 1, 1),
        (2, 2.5, 1, 1),  # the load 2-3 on 2 cores: one thread
        (2, 9.0, 1, 1),  # never fewer than one
        (8, 3.2, 1, 5),  # 4.8 free
        (8, 0.0, 2, 4),  # two workers share the cores
        (8, 4.0, 2, 2),  # ... and the free ones
        (8, 0.0, 3, 2),  # at most cores // workers
        (2, 0.0, 2, 1),  # one worker per core (the launcher's default on a CPU)
        (2, 0.0, 4, 1),
    ],
)
def test_choose_threads_takes_the_free_cores(cores, load, workers, expected):
    choice = choose_threads(cores, load, workers)
    assert choice.value == expected
    assert choice.reason.startswith(f"auto: {cores} cores, load average {load:.2f}")


@pytest.mark.parametrize(
    ("cores", "load", "workers", "expected"),
    [(2, 0.0, 1, 2), (2, 9.0, 1, 2), (8, 6.0, 2, 4), (8, 0.0, 3, 2), (2, 3.0, 2, 1)],
)
def test_with_passive_waiting_each_worker_takes_its_cores_whatever_the_load(
    cores, load, workers, expected
):
    choice = choose_threads(cores, load, workers, passive=True)
    assert choice.value == expected
    assert choice.reason.endswith(f"OpenMP waits passively: {expected}")


def test_which_processes_wait_passively(monkeypatch):
    assert threads.waits_passively({"OMP_WAIT_POLICY": "passive"})
    assert not threads.waits_passively({"OMP_WAIT_POLICY": "ACTIVE"})
    assert not threads.waits_passively({})
    monkeypatch.setattr(threads, "_wait_policy", "PASSIVE (set by fedbench)")
    assert threads.waits_passively()
    monkeypatch.setattr(threads, "_wait_policy", "default (torch was imported before fedbench)")
    assert not threads.waits_passively()


def test_choose_threads_without_a_load_average_takes_each_workers_cores():
    assert choose_threads(6, None, 2) == ThreadChoice(
        3, "auto: 6 cores, no load average: 3 per worker"
    )


def test_the_wait_policy_is_set_passive_before_torch_loads():
    environ: dict[str, str] = {}
    assert passive_wait_policy(environ, loaded={}) == "PASSIVE (set by fedbench)"
    assert environ == {"OMP_WAIT_POLICY": "PASSIVE"}


def test_a_wait_policy_the_user_set_is_kept():
    environ = {"OMP_WAIT_POLICY": "ACTIVE"}
    assert passive_wait_policy(environ, loaded={}) == "ACTIVE (from the environment)"
    assert environ == {"OMP_WAIT_POLICY": "ACTIVE"}


def test_the_wait_policy_after_torch_says_it_came_too_late_but_reaches_workers():
    environ: dict[str, str] = {}
    policy = passive_wait_policy(environ, loaded={"torch": object()})
    assert policy == "default (torch was imported before fedbench)"
    assert environ == {"OMP_WAIT_POLICY": "PASSIVE"}  # inherited by worker processes


def test_importing_fedbench_sets_the_policy_for_torch_in_a_fresh_process():
    # The command line's process: fedbench first, then torch reads the variable.
    env = {k: v for k, v in cli_env().items() if k != "OMP_WAIT_POLICY"}
    script = (
        "import os, fedbench, torch\n"
        "from fedbench import threads\n"
        "print(os.environ['OMP_WAIT_POLICY'], threads.current_record()['omp_wait_policy'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "PASSIVE PASSIVE (set by fedbench)"


@pytest.fixture
def fresh_choice(monkeypatch):
    """This process as if fedbench had not chosen threads yet; torch's count restored after."""
    before = torch.get_num_threads()
    for name in ("_auto", "_applied", "_last"):
        monkeypatch.setattr(threads, name, None)
    # Threads that spin (the policy of a process that loaded torch first): the load decides.
    monkeypatch.setattr(threads, "_wait_policy", "default (torch was imported before fedbench)")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    # torch's default caps the choice (the physical cores): above every count mocked below, on
    # any machine the tests run on.
    torch.set_num_threads(8)
    yield
    torch.set_num_threads(before)


def test_runtime_threads_is_capped_at_the_cores_of_the_process(fresh_choice, monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    choice = threads_for_run(10000)
    assert choice == ThreadChoice(
        2, "runtime.threads 10000, capped at the 2 cores this process may use (CPU affinity)"
    )
    assert torch.get_num_threads() == 2


def test_runtime_threads_overrides(fresh_choice, monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 4)
    assert threads_for_run(3) == ThreadChoice(3, "runtime.threads")
    assert torch.get_num_threads() == 3
    assert threads.current_record()["value"] == 3
    assert threads.current_record()["reason"] == "runtime.threads"


def test_auto_chooses_once_per_process_from_cores_and_load(fresh_choice, monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    monkeypatch.setattr(threads, "load_average", lambda: 2.5)
    first = threads_for_run("auto")
    assert first.value == 1 and torch.get_num_threads() == 1
    # Later runs of the process keep it: the load now counts this process' own training.
    monkeypatch.setattr(threads, "load_average", lambda: 0.0)
    assert threads_for_run("auto") == first
    # An override for one run, then auto again: back to the process' choice.
    threads_for_run(2)
    assert threads_for_run("auto") == first and torch.get_num_threads() == 1


def test_auto_with_passive_waiting_takes_the_cores(fresh_choice, monkeypatch):
    monkeypatch.setattr(threads, "_wait_policy", "PASSIVE (set by fedbench)")
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    monkeypatch.setattr(threads, "load_average", lambda: 2.5)
    choice = threads_for_run("auto")
    assert choice == ThreadChoice(2, "auto: 2 cores, OpenMP waits passively: 2")
    assert torch.get_num_threads() == 2


def test_auto_takes_no_more_than_torchs_default_of_physical_cores(fresh_choice, monkeypatch):
    monkeypatch.setattr(threads, "_wait_policy", "PASSIVE (set by fedbench)")
    monkeypatch.setattr(threads, "available_cores", lambda: 8)  # 4 cores, 2 hyperthreads each
    torch.set_num_threads(4)  # torch's default: the physical cores
    assert threads_for_run("auto") == ThreadChoice(4, "auto: 4 cores, OpenMP waits passively: 4")


def test_auto_keeps_a_count_someone_else_set(fresh_choice, monkeypatch):
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    monkeypatch.setattr(threads, "load_average", lambda: 0.0)
    assert threads_for_run("auto").value == 2
    torch.set_num_threads(1)  # a caller's own choice (a test pinning the float order)
    kept = threads_for_run("auto")
    assert kept == ThreadChoice(1, "set in this process by torch.set_num_threads")
    assert torch.get_num_threads() == 1


def test_auto_follows_omp_num_threads(fresh_choice, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(threads, "load_average", lambda: 0.0)
    assert threads_for_run("auto") == ThreadChoice(1, "OMP_NUM_THREADS")


def test_runtime_threads_is_a_speed_setting_outside_the_run_id():
    base = RunConfig()
    assert base.runtime.threads == "auto"
    pinned = parse_run_config({**base.to_dict(), "runtime": {"threads": 1}})
    assert pinned.runtime.threads == 1
    assert pinned.run_id() == base.run_id()


def test_runtime_threads_below_one_is_refused(run_cli, tmp_path: Path):
    code, _, err = run_cli("train", "--set", "runtime.threads=0", "--out", str(tmp_path))
    assert code == 2
    assert "runtime.threads" in err


@pytest.mark.engine
def test_summary_records_the_threads_and_why(fresh_choice, run_cli, tmp_path: Path):
    code, _, err = run_cli(
        "train",
        "--set",
        "data.name=digits",
        "--set",
        "fl.rounds=1",
        "--set",
        "fl.local_steps=1",
        "--set",
        "runtime.threads=1",
        "--out",
        str(tmp_path),
    )
    assert code == 0, err
    (summary_file,) = tmp_path.glob("runs/*/summary.json")
    summary = json.loads(summary_file.read_text())
    assert summary["threads"]["value"] == 1 == summary["torch_threads"]
    assert summary["threads"]["reason"] == "runtime.threads"
    assert "omp_wait_policy" in summary["threads"]


def test_a_block_at_its_own_thread_count_leaves_the_process_choices_as_they_were(
    fresh_choice, monkeypatch
):
    """`--estimate` trains its probes at a sweep worker's share (1 thread on 2 cores): after
    it, the dry run's plan read torch's default as 1 and planned one client process."""
    monkeypatch.setattr(threads, "_default", None)
    with threads.kept_thread_state(1):
        assert torch.get_num_threads() == 1
        threads.run_cores()  # the probe's plan reads torch's default
    # torch's default was read before the block, not at its one thread.
    assert threads.torch_default_threads() == 8 == torch.get_num_threads()
    chosen = threads.apply(ThreadChoice(3, "chosen"))
    with threads.kept_thread_state(1):
        threads.apply(ThreadChoice(1, "the probe's run"), automatic=False)
    assert torch.get_num_threads() == 3
    assert threads.launcher_share() == chosen and threads.set_by_someone_else() is None
    assert threads.current_record()["reason"] == "chosen"


@pytest.mark.parametrize(
    ("cores", "others", "shared"), [(2, 0, None), (2, 1, None), (2, 2, 2), (8, 5, None), (8, 6, 6)]
)
def test_a_machine_is_shared_when_other_jobs_run_on_three_quarters_of_its_cores(
    monkeypatch, cores, others, shared
):
    monkeypatch.setattr(threads.os, "cpu_count", lambda: cores)
    monkeypatch.setattr(threads, "others_running", lambda: others)
    assert threads.shared_with_others() == shared
    monkeypatch.setattr(threads, "others_running", lambda: None)  # no count (not Linux)
    assert threads.shared_with_others() is None
