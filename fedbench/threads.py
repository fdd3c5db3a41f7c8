"""How many CPU threads torch uses, and OpenMP threads that sleep instead of spinning while they
wait (docs/performance.md, "Threads on a shared machine").

On a machine that other jobs share, torch's default (one thread per core, OpenMP threads that
spin while they wait) collapses: a parallel region waits for its slowest thread, the other jobs
hold the cores, and the waiting threads spin against them. Measured on the digits CNN at a load
average of 2-3 on 2 cores: 27 client steps/s at 2 threads against 292 at one. So fedbench asks
OpenMP to wait passively (`OMP_WAIT_POLICY=PASSIVE`); with that, every core of a worker beat one
thread under load in each measured cycle (benchmarks/shared_machine.py), so the count stays one
share of the cores per worker. Where the threads spin all the same (a policy the user set, torch loaded before
fedbench), the count comes from the cores actually free: the CPU affinity
(`os.sched_getaffinity`) less the 1-minute load average, split over the workers of a sweep.

The wait policy is read once, when torch loads its OpenMP runtime (`import torch`), so it is set
when fedbench itself is imported (`import fedbench`, the command line's start: neither imports
torch) and reaches the sweep's worker processes through their environment; a process that
imported torch before fedbench keeps the policy it started with, and says so.

This module imports no torch at import time: the command line imports it before parsing.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

WAIT_POLICY = "OMP_WAIT_POLICY"
#: What the OpenMP runtime of this process was started with (set by passive_wait_policy).
_wait_policy = "unknown"


@dataclass(frozen=True)
class ThreadChoice:
    """A torch thread count and why (summary.json's `threads`)."""

    value: int
    reason: str

    def record(self) -> dict[str, Any]:
        return {"value": self.value, "reason": self.reason, "omp_wait_policy": _wait_policy}


def passive_wait_policy(environ: Any = None, loaded: Any = None) -> str:
    """Set OMP_WAIT_POLICY=PASSIVE unless the user set it, while torch is not loaded yet (it is
    read when torch loads OpenMP); return the policy this process runs with, e.g. 'PASSIVE (set
    by fedbench)', 'ACTIVE (from the environment)'. `environ` and `loaded` (the loaded modules)
    are for tests."""
    global _wait_policy
    environ = os.environ if environ is None else environ
    loaded = sys.modules if loaded is None else loaded
    given = environ.get(WAIT_POLICY)
    if given:
        _wait_policy = f"{given} (from the environment)"
    elif "torch" in loaded:
        # Too late for this process; worker processes started from here still get it.
        environ[WAIT_POLICY] = "PASSIVE"
        _wait_policy = "default (torch was imported before fedbench)"
    else:
        environ[WAIT_POLICY] = "PASSIVE"
        _wait_policy = "PASSIVE (set by fedbench)"
    return _wait_policy


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. under taskset or a container's
    cpuset), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def load_average() -> float | None:
    """The 1-minute load average: runnable processes, ours included (None where the OS has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


#: The kernel's count of runnable tasks (Linux): others_running reads it.
LOADAVG = "/proc/loadavg"
#: How long a reading of LOADAVG stands for the machine: the plans of a table's distinct runs,
#: listed by one `--dry-run`, share one (16 readings of 40 ms each took 0.67 s of Table 1's).
READING_S = 2.0
#: The last reading of LOADAVG: (time.monotonic() when taken, its count).
_reading: tuple[float, int | None] | None = None


def others_running(samples: int = 5, gap_s: float = 0.01, path: str | None = None) -> int | None:
    """How many tasks other jobs have running now: the fewest runnable tasks over `samples`
    reads of the kernel's count (LOADAVG's "running/total"; `path`: another file of its
    format, read afresh), less this process' own (None where the OS has no such count). Unlike
    the load average, which trails by a minute, it does not count a run's own processes that
    ended a moment ago, and the fewest of a few reads leaves out a job that only flickered. A
    reading of LOADAVG stands for READING_S seconds."""
    global _reading
    if path is None and _reading is not None and time.monotonic() - _reading[0] < READING_S:
        return _reading[1]
    counts = []
    found: int | None = None
    for i in range(samples):
        try:
            with open(path or LOADAVG) as fh:
                counts.append(int(fh.read().split()[3].split("/")[0]))
        except (OSError, IndexError, ValueError):
            break
        if i < samples - 1:
            time.sleep(gap_s)
    else:
        found = max(0, min(counts) - 1)
    if path is None:
        _reading = (time.monotonic(), found)
    return found


#: Other jobs' running tasks, as a share of the machine's cores, from which fedbench counts the
#: machine as shared with them (shared_with_others): on 2 cores, 2 busy jobs.
LOADED_SHARE = 0.75


def shared_with_others() -> int | None:
    """Other jobs' running tasks where they hold the machine (at least LOADED_SHARE of its
    cores), else None: a run then trains a round's clients in one process each
    (fedbench.engine.layout.shared_load) and a sweep starts two workers per core
    (fedbench.runner.launcher.cpu_workers), since the scheduler shares the cores out per
    runnable process. The running count is the whole machine's, so it is weighed against all its
    cores (in a container pinned to a few of them, not those few)."""
    others = others_running()
    if others is None or others < LOADED_SHARE * max(1, os.cpu_count() or 1):
        return None
    return others


def choose_threads(
    cores: int, load: float | None, workers: int = 1, passive: bool = False
) -> ThreadChoice:
    """Threads for each of `workers` processes on `cores` cores at a 1-minute `load`.

    Where OpenMP waits `passive`ly, each worker takes its cores (cores // workers, at least 1),
    whatever the load: sleeping threads do not fight the other jobs, and the scheduler gives
    each thread its share, so under load the cores still beat one thread (1.1-4.9x per cycle on
    the Flower anchor's workload: docs/performance.md). Where its threads spin (a policy set by the
    user, or torch loaded before fedbench), the free cores are `cores - load`; a core counts as
    free when at most half of it is in use (rounding), and each worker gets its share, at least
    1 and at most cores // workers: too few threads cost at most the cores left idle, too many
    cost 10x on a loaded machine (the module's docstring), so the rounding leans to fewer."""
    workers = max(1, workers)
    most = max(1, cores // workers)
    if passive:
        per = f" over {workers} workers" if workers > 1 else ""
        return ThreadChoice(most, f"auto: {cores} cores{per}, OpenMP waits passively: {most}")
    if load is None:
        return ThreadChoice(most, f"auto: {cores} cores, no load average: {most} per worker")
    free = max(0.0, cores - load)
    value = max(1, min(most, math.floor(free / workers + 0.5)))
    over = f" over {workers} workers" if workers > 1 else ""
    return ThreadChoice(
        value,
        f"auto: {cores} cores, load average {load:.2f}, {free:.1f} free{over}: {value}",
    )


#: The automatic choice this process made (or was given by its launcher), and the count fedbench
#: last set: a different count in torch means someone else set it, and it is kept.
_auto: ThreadChoice | None = None
_applied: int | None = None
_last: ThreadChoice | None = None


def apply(choice: ThreadChoice, *, automatic: bool = True) -> ThreadChoice:
    """Set torch's thread count to `choice` (a launcher's choice for its worker, or an override);
    an `automatic` choice is kept for the later runs of this process."""
    global _auto, _applied, _last
    import torch

    torch_default_threads()  # read before the first change
    torch.set_num_threads(choice.value)
    _applied, _last = choice.value, choice
    if automatic:
        _auto = choice
    return choice


def threads_for_run(
    setting: int | Literal["auto"], source: str = "runtime.threads"
) -> ThreadChoice:
    """Set and return the thread count of a run: `setting` when it is a number; with `auto`,
    OMP_NUM_THREADS where the user set it, a count set in this process by someone else
    (torch.set_num_threads) as it is, else the choice this process made for its first run (or its
    launcher made for it), else a new choice from the free cores. One choice per process: the 1-
    minute load average counts this process' own training once it has run, and the runs of one
    process then add up their floats in one order."""
    global _last
    import torch

    if setting != "auto":
        return apply(capped(int(setting), source), automatic=False)
    current = torch.get_num_threads()
    if _applied is not None and current != _applied:
        _last = ThreadChoice(current, "set in this process by torch.set_num_threads")
        return _last
    if _auto is not None:
        return apply(_auto)
    given = os.environ.get("OMP_NUM_THREADS", "")
    if given.isdigit() and int(given) > 0:
        return apply(ThreadChoice(int(given), "OMP_NUM_THREADS"))
    # torch's own default counts physical cores (the affinity counts hyperthreads, which slow
    # these loops down): never more than it, so that a quiet machine runs as it did before.
    cores = min(available_cores(), current)
    return apply(choose_threads(cores, load_average(), passive=waits_passively()))


@contextmanager
def kept_thread_state(threads: int | None = None) -> Iterator[None]:
    """Run the block at `threads` torch threads (None: as they are), then put torch's count and
    this module's record of it back: a probe that trains runs in this process (`--estimate`)
    leaves the choices of the process' later runs as they were."""
    global _auto, _applied, _last
    import torch

    torch_default_threads()  # read before the block changes the count
    saved, before = (_auto, _applied, _last), torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
        _auto, _applied, _last = saved


def capped(value: int, source: str) -> ThreadChoice:
    """A thread count asked for (`runtime.threads`, `--threads`), at most the cores this process
    may run on: more threads than cores only queue behind each other (and 10000 of them would
    start 10000 threads)."""
    cores = available_cores()
    if value <= cores:
        return ThreadChoice(value, source)
    return ThreadChoice(
        cores, f"{source} {value}, capped at the {cores} cores this process may use (CPU affinity)"
    )


def asked_capped(setting: int | Literal["auto"]) -> bool:
    """Whether a numeric `setting` is above the cores this process may run on (`capped`)."""
    return setting != "auto" and int(setting) > available_cores()


def run_cores() -> ThreadChoice:
    """The cores one run may use, without setting anything: a sweep worker's share (the choice
    its launcher handed it), this process' own first choice, else the cores of the process (its
    affinity, at most torch's default of physical cores) as `choose_threads` counts them."""
    if _auto is not None:
        return _auto
    cores = min(available_cores(), torch_default_threads())
    return choose_threads(cores, load_average(), passive=waits_passively())


#: torch's own thread count before fedbench first set one (its count of physical cores).
_default: int | None = None


def torch_default_threads() -> int:
    """torch's default thread count (read before fedbench changes it, and kept)."""
    global _default
    if _default is None:
        import torch

        _default = torch.get_num_threads() if _applied is None else max(_applied, 1)
    return _default


def launcher_share() -> ThreadChoice | None:
    """The cores a launcher handed this process (a sweep's worker), or this process' own first
    automatic choice; None when neither was made."""
    return _auto


def set_by_someone_else() -> int | None:
    """The thread count a caller set in this process with torch.set_num_threads since fedbench
    last set one (None: fedbench's count is in place, or fedbench never set one)."""
    import torch

    current = torch.get_num_threads()
    return current if _applied is not None and current != _applied else None


def current_wait_policy() -> str:
    """The OpenMP wait policy this process runs with, and who set it (`passive_wait_policy`)."""
    return _wait_policy


def waits_passively(environ: Any = None) -> bool:
    """Whether OpenMP's threads sleep while they wait: in this process (the policy torch was
    loaded with), or with `environ`, in the processes started with it (a sweep's workers)."""
    if environ is not None:
        return str(environ.get(WAIT_POLICY, "")).upper() == "PASSIVE"
    return _wait_policy.upper().startswith("PASSIVE")


def current_record() -> dict[str, Any]:
    """summary.json's `threads`: the count torch runs with now, and why."""
    import torch

    value = torch.get_num_threads()
    if _last is not None and _last.value == value:
        return _last.record()
    return ThreadChoice(value, "torch's default").record()
