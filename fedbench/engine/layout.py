"""The CPU layout of a run, as entries of its execution plan (fedbench.engine.plan): how many
torch threads each process uses, the OpenMP wait policy they run with, and how many processes
train a round's clients (fedbench.engine.client_pool).

The rule comes from a measured table (docs/performance.md, "CPU layout"; rerun it with
`python benchmarks/shared_machine.py`): on the digits CNN (53k parameters on 8x8 images, batch
32), 20 clients, 5 a round, K 20, on a quiet 2-core machine, one process at 2 threads (OpenMP waiting
passively) ran 209 client steps/s and one process at 1 thread 442: a small model's kernels are
too short to split over threads, and a thread that waits for the others costs more than it
adds. Separate clients are independent work, so the run's other cores train other clients of
the round in processes of one thread each. A model of 1M parameters or more keeps the cores
as threads of one process (its kernels split well; processes are not measured for it).

A run asks for nothing and gets this; `runtime.threads` and `runtime.client_processes` ask
for a count (the threads at most the cores the process may use), and a sweep's worker gets its
share of the cores from its launcher (fedbench.threads), so that the runs of a sweep and the
processes of a run divide the cores between them instead of each taking all of them.
"""

from __future__ import annotations

import multiprocessing
import os
from typing import NamedTuple

import fedbench.threads
from fedbench.engine.schedule import clients_per_round
from fedbench.engine.setup import RunSetup
from fedbench.threads import (
    available_cores,
    capped,
    current_wait_policy,
    launcher_share,
    run_cores,
    set_by_someone_else,
)


class Entry(NamedTuple):
    """One entry of the plan (fedbench.engine.plan.Choice's fields, which the plan builds from
    it: the plan imports this module, not the other way round)."""

    what: str
    value: str
    reason: str
    fallback: bool = False


#: A run of fewer client steps (rounds x sampled clients x K) trains in one process: a process
#: is forked and handed each round's weights, which pays off over a few hundred steps of a
#: small model (a step of the digits CNN takes about 2 ms), and a test's run of a few steps
#: stays in the process that runs it.
MIN_SPLIT_STEPS = 500


def _one_thread_wins(setup: RunSetup, executor: str, small: bool) -> bool:
    """Whether the measured rule gives this run one thread per process (module docstring)."""
    return setup.device.type == "cpu" and executor == "sequential" and small


def threads_choice(setup: RunSetup, executor: str, small: bool) -> Entry:
    """torch's threads in each process of the run, and why."""
    setting = setup.cfg.runtime.threads
    if setting != "auto":
        choice = capped(int(setting), "runtime.threads")
        return Entry("threads", str(choice.value), choice.reason, choice.value < int(setting))
    someone = set_by_someone_else()
    if someone is not None:
        return Entry("threads", str(someone), "set in this process by torch.set_num_threads")
    given = os.environ.get("OMP_NUM_THREADS", "")
    if given.isdigit() and int(given) > 0:
        choice = capped(int(given), "OMP_NUM_THREADS")
        share = launcher_share()
        if share is not None and share.value < choice.value:
            # A sweep's worker: the environment it inherited asks for more than its share of
            # the cores, which the other workers hold.
            why = f"OMP_NUM_THREADS {given}, at most this process' share: {share.reason}"
            return Entry("threads", str(share.value), why, True)
        return Entry("threads", str(choice.value), choice.reason)
    if _one_thread_wins(setup, executor, small):
        return Entry(
            "threads",
            "1",
            "auto: a model under 1M parameters on the CPU: one thread per process measured "
            "fastest (digits CNN, quiet 2 cores: 442 client steps/s at 1 thread, 209 at 2)",
        )
    cores = run_cores()
    return Entry("threads", str(cores.value), cores.reason)


def wait_policy_choice(threads: int) -> Entry:
    """The OpenMP wait policy: read once, when torch loads OpenMP (set at fedbench's import,
    fedbench.threads), so the plan says which one the run has and what it does here."""
    policy = current_wait_policy()
    if threads == 1:
        why = "one thread per process: no thread waits for another, so the policy does not act"
    elif policy.upper().startswith("PASSIVE"):
        why = (
            "threads sleep while they wait: spinning ones collapse when other jobs hold the "
            "cores (27 vs 292 client steps/s at a load of 2-3 on 2 cores)"
        )
    else:
        why = "threads spin while they wait: the thread count leaves the busy cores out"
    return Entry("omp_wait_policy", policy, why)


def _why_one_process(setup: RunSetup, executor: str, compiled: bool) -> str | None:
    """Why this run's clients cannot train in several processes (None: they can); `compiled`:
    the plan compiles part of the step."""
    cfg = setup.cfg
    if setup.device.type != "cpu":
        return f"the model is on {setup.device.type}, not the CPU"
    if executor != "sequential":
        return "the vectorized executor trains a round's clients together"
    if compiled:
        return "each process would compile its own step"
    if cfg.privacy is not None and cfg.privacy.level == "sample":
        return "sample-level DP checks its clipping method in the process that trains"
    if "fork" not in multiprocessing.get_all_start_methods():
        return "this platform cannot fork a process that shares the run's data"
    if multiprocessing.current_process().daemon:
        return "a sweep's worker process cannot start processes of its own"
    if clients_per_round(cfg.fl.participation, setup.num_clients) < 2:
        return "one client a round"
    return None


#: Set once a forked process of this one failed to take a gradient: it stays so (fork_problem).
_autograd_fork_broken = False


def fork_problem() -> str | None:
    """Why a process forked from this one could not train (None: it can). Once autograd has
    started its worker threads in a process (torch.compile's backward does, on the CPU too),
    torch refuses every gradient in a process forked from it ("Unable to handle autograd's
    threading in combination with fork-based multiprocessing"); torch offers no way to ask, so a
    forked child takes one tiny gradient and says. Asked only where a run would fork."""
    global _autograd_fork_broken
    if not _autograd_fork_broken:
        import torch

        pid = os.fork()
        if pid == 0:  # the child: one gradient, then out without the parent's exit handlers
            code = 1
            try:
                x = torch.ones((), requires_grad=True)
                torch.autograd.grad(x * 2.0, x)
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        _autograd_fork_broken = status != 0
    if _autograd_fork_broken:
        return (
            "autograd's worker threads already run in this process (a compiled step ran "
            "here): a process forked from it cannot take gradients"
        )
    return None


def balanced_processes(clients: int, slots: int) -> int:
    """The processes that train a round's `clients` on `slots` cores (one thread each): one per
    core, or more where whole clients do not split evenly over the cores. 5 clients on 2
    processes take 3 client-times a round (one process trains 3); on 3 processes of which two
    train 2 clients, the cores share out 5 client-times and the round takes 2.5. So: the
    fewest processes, at least `slots`, whose largest share (ceil(clients / processes)) is at
    most the cores' even share (clients / slots). Measured on the digits CNN, 5 clients a round,
    2 cores: 219 client steps/s on 2 processes, 266-308 on 3, 267-286 on 5."""
    if slots < 2 or clients < 2:
        return 1
    for processes in range(slots, clients + 1):
        if slots * -(-clients // processes) <= clients:
            return processes
    return clients


#: On a shared machine, at most this many processes per core of the run.
LOADED_PER_CORE = 4


def shared_load(clients: int, processes: int) -> str | None:
    """Why a run of `clients` a round, in `processes` processes on a quiet machine, takes one
    process per client instead (None: it does not). The scheduler shares the cores out per
    runnable task: beside b busy jobs, p processes of the run get p / (p + b) of them. Measured
    on the peers' workload (5 clients a round, 2 cores; benchmarks/shared_machine.py, 2 cycles):
    quiet, 3 processes ran 354-378 client steps/s and 5 processes 330-364; beside two busy
    loops, 3 processes 155-214 and 5 processes 201-278, within 1.31x of their quiet speed (3
    processes: 1.76x). So: one process per client (at most LOADED_PER_CORE per core) where other
    jobs hold the machine when the run starts (fedbench.threads.shared_with_others); else the
    even share of a quiet machine."""
    others = fedbench.threads.shared_with_others()
    if others is None or clients <= processes:
        return None
    machine = max(1, os.cpu_count() or 1)
    return (
        f"one per client of the round: other jobs run {others} tasks on the machine's {machine} "
        f"cores, and the scheduler gives each runnable process its share (on a quiet machine: "
        f"{processes})"
    )


def _asked_processes(asked: int, sampled: int, why_not: str | None) -> Entry:
    """The client_processes entry of a run that asked for `asked` processes."""
    if asked == 1:
        return Entry("client_processes", "1", "runtime.client_processes 1")
    if why_not is not None:
        return Entry("client_processes", "1", f"{asked} asked, but {why_not}", True)
    n = min(asked, sampled)
    if n > 1 and (broken := fork_problem()) is not None:
        return Entry("client_processes", "1", f"{asked} asked, but {broken}", True)
    capped_note = f" (at most the {sampled} clients of a round)" if n < asked else ""
    return Entry("client_processes", str(n), f"runtime.client_processes {asked}{capped_note}")


def processes_choice(
    setup: RunSetup, executor: str, threads: int, small: bool, compiled: bool
) -> Entry:
    """How many processes train each round's clients (this one and forked ones), and why."""
    cfg = setup.cfg
    asked = cfg.runtime.client_processes
    sampled = clients_per_round(cfg.fl.participation, setup.num_clients)
    why_not = _why_one_process(setup, executor, compiled)
    if asked != "auto":
        return _asked_processes(int(asked), sampled, why_not)
    if why_not is not None:
        return Entry("client_processes", "1", f"auto: {why_not}")
    if not small:
        return Entry(
            "client_processes",
            "1",
            "auto: a model of 1M parameters or more: threads take the cores",
        )
    cores = run_cores()
    slots = cores.value // max(threads, 1)
    n = balanced_processes(sampled, slots)
    busy = shared_load(sampled, n) if n >= 2 else None
    if busy is not None:
        n = min(sampled, LOADED_PER_CORE * slots)
    if n < 2:
        return Entry(
            "client_processes",
            "1",
            f"auto: the run's {cores.value} cores hold one process of {threads} threads "
            f"({cores.reason})",
        )
    steps = cfg.fl.rounds * sampled * cfg.fl.local_steps
    if steps < MIN_SPLIT_STEPS:
        return Entry(
            "client_processes",
            "1",
            f"auto: {steps} client steps in all, fewer than the {MIN_SPLIT_STEPS} a process "
            "pays off over",
        )
    broken = fork_problem()
    if broken is not None:
        return Entry("client_processes", "1", f"auto: {broken}")
    per = "one per core" if n == slots else f"{n} on its {slots} cores, an even share each"
    if busy is not None:
        per = f"{n} on its {slots} cores, {busy}"
    return Entry(
        "client_processes",
        str(n),
        f"auto: the round's {sampled} clients over {n} processes of {threads} thread"
        f"{'s' if threads > 1 else ''}, {per} ({cores.reason}); "
        f"{available_cores()} cores in the CPU affinity",
    )


def layout_choices(setup: RunSetup, executor: str, small: bool, compiled: bool) -> list[Entry]:
    """The plan's `threads`, `omp_wait_policy` and `client_processes` entries; `small`: the
    model is under the plan's SMALL_MODEL parameters; `compiled`: the plan's compile entry is not
    off."""
    threads = threads_choice(setup, executor, small)
    count = int(threads.value)
    return [
        threads,
        wait_policy_choice(count),
        processes_choice(setup, executor, count, small, compiled),
    ]
