"""The CPU layout entries of the execution plan (fedbench.engine.layout): threads per process,
the OpenMP wait policy and the client processes, each with its reason; the cores divided
between a sweep's workers and a run's processes."""

from __future__ import annotations

import pytest
import torch

from fedbench import threads
from fedbench.config import load_run_config
from fedbench.engine import layout
from fedbench.engine.layout import MIN_SPLIT_STEPS
from fedbench.engine.plan import ExecutionPlan, execution_plan
from fedbench.engine.setup import prepare_run
from fedbench.threads import ThreadChoice

pytestmark = pytest.mark.engine

#: The peers' workload: 20 clients, 5 a round, K 20: 1200 client steps in 12 rounds.
WORKLOAD = [
    "data.name=digits",
    "model.name=cnn",
    "runtime.device=cpu",
    "partition.clients=20",
    "fl.participation=0.25",
    "fl.local_steps=20",
    "fl.rounds=12",
]


@pytest.fixture
def two_quiet_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process on 2 cores that chose no threads yet, OpenMP waiting passively, no load."""
    for name in ("_auto", "_applied", "_last"):
        monkeypatch.setattr(threads, name, None)
    monkeypatch.setattr(threads, "_default", 2)
    monkeypatch.setattr(threads, "_wait_policy", "PASSIVE (set by fedbench)")
    monkeypatch.setattr(threads, "available_cores", lambda: 2)
    monkeypatch.setattr(threads, "load_average", lambda: 0.0)
    monkeypatch.setattr(threads, "others_running", lambda: 0)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    # A process that forks can train (this pytest process may have run a compiled step, after
    # which it cannot: test_a_compiled_step_keeps_a_run_in_one_process).
    monkeypatch.setattr(layout, "fork_problem", lambda: None)


def _plan(*items: str) -> ExecutionPlan:
    return execution_plan(prepare_run(load_run_config(None, [*WORKLOAD, *items])))


def test_a_small_model_runs_one_thread_per_process_on_every_core(two_quiet_cores) -> None:
    plan = _plan()
    assert [c.what for c in plan.choices][-3:] == ["threads", "omp_wait_policy", "client_processes"]
    # 5 clients do not split evenly over 2 cores: 3 processes (2 + 2 + 1 clients) share them.
    assert plan.threads == 1 and plan.client_processes == 3
    assert "442 client steps/s at 1 thread, 209 at 2" in plan["threads"].reason
    assert plan["omp_wait_policy"].value == "PASSIVE (set by fedbench)"
    assert "does not act" in plan["omp_wait_policy"].reason
    assert "5 clients over 3 processes of 1 thread, 3 on its 2 cores" in (
        plan["client_processes"].reason
    )
    assert plan.fallbacks == []


def test_runtime_threads_is_capped_at_the_cores_of_the_process(two_quiet_cores) -> None:
    plan = _plan("runtime.threads=10000")
    choice = plan["threads"]
    assert plan.threads == 2 and choice.fallback
    assert choice.reason == (
        "runtime.threads 10000, capped at the 2 cores this process may use (CPU affinity)"
    )
    # Two threads fill the two cores: one process.
    assert plan.client_processes == 1
    assert "2 cores hold one process of 2 threads" in plan["client_processes"].reason
    assert "threads sleep while they wait" in plan["omp_wait_policy"].reason


def test_a_short_run_stays_in_one_process(two_quiet_cores) -> None:
    plan = _plan("fl.rounds=4")  # 4 x 5 x 20 = 400 client steps
    assert MIN_SPLIT_STEPS > 400
    assert plan.threads == 1 and plan.client_processes == 1
    assert f"400 client steps in all, fewer than the {MIN_SPLIT_STEPS}" in (
        plan["client_processes"].reason
    )


def test_a_sweep_workers_share_of_the_cores_bounds_its_processes(
    two_quiet_cores, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The launcher of a sweep of 2 workers on 2 cores handed this one 1 core.
    monkeypatch.setattr(threads, "_auto", ThreadChoice(1, "auto: 2 cores over 2 workers: 1"))
    plan = _plan()
    assert plan.threads == 1 and plan.client_processes == 1
    assert "the run's 1 cores hold one process" in plan["client_processes"].reason
    # On 8 cores split over 2 workers, each run gets 4 cores: 5 clients over 5 processes (on 4,
    # a process would train 2 clients while the others wait).
    monkeypatch.setattr(threads, "available_cores", lambda: 8)
    monkeypatch.setattr(threads, "_auto", ThreadChoice(4, "auto: 8 cores over 2 workers: 4"))
    assert _plan().client_processes == 5
    # 8 clients a round (participation 0.4) split evenly over the 4 cores: 4 processes.
    assert _plan("fl.participation=0.4").client_processes == 4


@pytest.mark.parametrize(
    ("clients", "cores", "processes"),
    [
        (5, 2, 3),  # 2 + 2 + 1 clients: 2.5 client-times a round on 2 cores, not 3
        (4, 2, 2),  # even
        (3, 2, 3),  # one client each: 1.5 client-times, not 2
        (7, 2, 3),  # 3 + 2 + 2 (on 3.5 client-times of each core), not 4 + 3
        (10, 2, 2),
        (5, 4, 5),  # 2 + 1 + 1 + 1 would take 2 client-times; 5 x 1 on 4 cores takes 1.25
        (9, 4, 5),  # 2 + 2 + 2 + 2 + 1: 2 <= 9 / 4
        (1, 2, 1),
        (5, 1, 1),
    ],
)
def test_balanced_processes_give_no_process_more_than_an_even_share(
    clients: int, cores: int, processes: int
) -> None:
    assert layout.balanced_processes(clients, cores) == processes


@pytest.mark.parametrize(
    ("others", "items", "processes"),
    [
        (0, [], 3),  # quiet: the even share
        (1, [], 3),  # one busy job on 2 cores: under 0.75 of them
        (2, [], 5),  # two busy jobs: one process per client of the round
        (7, [], 5),
        (2, ["fl.participation=0.2"], 4),  # 4 a round (2 + 2 when quiet): one each
        (2, ["fl.participation=1.0"], 8),  # 20 a round: at most 4 per core
    ],
)
def test_a_shared_machine_gets_one_process_per_client(
    two_quiet_cores, monkeypatch, others: int, items: list[str], processes: int
) -> None:
    """Beside b busy jobs the scheduler gives a run's p processes p / (p + b) of the cores: a run
    started while other jobs hold the cores trains a round's clients in one process each."""
    monkeypatch.setattr(threads, "others_running", lambda: others)
    monkeypatch.setattr(layout.os, "cpu_count", lambda: 2)  # the machine's cores
    entry = _plan(*items)["client_processes"]
    assert entry.value == str(processes)
    assert ("other jobs run" in entry.reason) == (others >= 2), entry.reason
    if processes == 5 and others >= 2:
        assert f"other jobs run {others} tasks on the machine's 2 cores" in entry.reason
        assert "(on a quiet machine: 3)" in entry.reason


def test_others_running_is_the_fewest_runnable_tasks_less_this_one(tmp_path) -> None:
    reads = iter(["0.50 0.40 0.30 3/120 999\n", "0.50 0.40 0.30 4/120 999\n"] * 3)
    path = tmp_path / "loadavg"

    class Reader:
        def __fspath__(self) -> str:
            path.write_text(next(reads))
            return str(path)

    # 3, 4, 3, 4, 3 running (this process among them): 2 of other jobs at every read.
    assert threads.others_running(samples=5, gap_s=0.0, path=Reader()) == 2  # type: ignore[arg-type]
    path.write_text("0.50 0.40 0.30 1/120 999\n")
    assert threads.others_running(samples=2, gap_s=0.0, path=str(path)) == 0
    assert threads.others_running(path=str(tmp_path / "missing")) is None
    path.write_text("garbage")
    assert threads.others_running(samples=1, path=str(path)) is None


def test_a_reading_of_the_kernels_count_stands_for_a_moment(tmp_path, monkeypatch) -> None:
    """The plans of a table's runs, listed one after the other, share one reading (each takes
    five reads 10 ms apart); a reading older than READING_S is taken again."""
    path = tmp_path / "loadavg"
    path.write_text("0.50 0.40 0.30 3/120 999\n")
    clock = [100.0]
    monkeypatch.setattr(threads, "LOADAVG", str(path))
    monkeypatch.setattr(threads, "_reading", None)
    monkeypatch.setattr(threads.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(threads.time, "sleep", lambda _s: None)
    assert threads.others_running() == 2
    path.write_text("0.50 0.40 0.30 1/120 999\n")
    clock[0] += threads.READING_S - 0.5
    assert threads.others_running() == 2  # the same moment
    assert threads.others_running(path=str(path)) == 0  # another file: read afresh
    clock[0] += 1.0
    assert threads.others_running() == 0


def test_processes_never_outnumber_a_rounds_clients(two_quiet_cores, monkeypatch) -> None:
    monkeypatch.setattr(threads, "available_cores", lambda: 16)
    monkeypatch.setattr(threads, "_default", 16)
    assert _plan().client_processes == 5
    asked = _plan("runtime.client_processes=8")["client_processes"]
    assert asked.value == "5" and "at most the 5 clients of a round" in asked.reason


@pytest.mark.parametrize(
    ("items", "why"),
    [
        (["runtime.compile=true"], "vectorized executor"),
        (["runtime.engine=sequential", "runtime.compile=true"], "compile its own step"),
        (["algorithm.name=dp_fedavg"], "sample-level DP"),
    ],
)
def test_runs_that_cannot_split_say_why(two_quiet_cores, items: list[str], why: str) -> None:
    auto = _plan(*items)["client_processes"]
    assert auto.value == "1" and why in auto.reason and not auto.fallback
    asked = _plan(*items, "runtime.client_processes=2")["client_processes"]
    assert asked.value == "1" and asked.fallback and why in asked.reason


def test_omp_num_threads_and_a_count_set_in_the_process_are_kept(
    two_quiet_cores, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    plan = _plan()
    assert plan.threads == 2 and plan["threads"].reason == "OMP_NUM_THREADS"
    assert plan.client_processes == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(threads, "_applied", 1)  # fedbench set 1; torch now runs 2 (a caller's)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    kept = _plan()["threads"]
    assert kept.value == "2" and kept.reason == "set in this process by torch.set_num_threads"


def test_print_plan_says_processes_and_threads(run_cli, two_quiet_cores) -> None:
    code, out, _ = run_cli("train", *[a for s in WORKLOAD for a in ("--set", s)], "--print-plan")
    assert code == 0
    assert "threads: 1 (auto: a model under 1M parameters" in out
    assert "client_processes: 3 (auto: the round's 5 clients over 3 processes" in out


def test_a_compiled_step_keeps_a_run_in_one_process() -> None:
    """After torch.compile's backward has run in a process (autograd's worker threads start),
    torch refuses every gradient in a process forked from it: the plan then keeps the run in
    one process and says why. In a fresh interpreter, so that this process stays as it is."""
    import subprocess
    import sys

    from tests.conftest import cli_env

    script = """
import torch
from torch import nn
from fedbench.engine.layout import fork_problem
assert fork_problem() is None
m = nn.Linear(4, 2)
torch.compile(m, backend="aot_eager")(torch.randn(8, 4)).sum().backward()
print(fork_problem())
"""
    done = subprocess.run(
        [sys.executable, "-c", script], env=cli_env(), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "a process forked from it cannot take gradients" in done.stdout


def test_a_sweep_workers_share_bounds_an_inherited_omp_num_threads(
    two_quiet_cores, monkeypatch
) -> None:
    """A worker of `run --workers 2` inherits OMP_NUM_THREADS=2 from the shell but holds one of
    the 2 cores: it runs at its share (the other worker holds the other core)."""
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setattr(threads, "_auto", ThreadChoice(1, "2 cores over 2 workers"))
    entry = _plan("model.name=resnet18")["threads"]
    assert (entry.value, entry.fallback) == ("1", True)
    assert entry.reason == "OMP_NUM_THREADS 2, at most this process' share: 2 cores over 2 workers"
    monkeypatch.setattr(threads, "_auto", None)  # a process of its own: the environment's count
    assert _plan("model.name=resnet18")["threads"].value == "2"
