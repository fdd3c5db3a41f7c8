"""`--estimate` is a plan's time a user can plan with: the probe and the real sweep agree."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from fedbench.runner.estimate import makespan
from fedbench.runner.probe import Probe
from fedbench.runner.sweep import probe_slots, run_sweep
from fedbench.runner.sweep_progress import workload_key, workloads_first
from fedbench.runner.table_config import expand, parse_table_config
from fedbench.threads import kept_thread_state
from tests.conftest import tiny_table_data


def _newcomer_table() -> dict:
    """A newcomer's table in small: a CNN on the embedded digits, 20 clients, FedAvg and
    FedAdamW and DP-FedAvg, two Dirichlet columns, one seed; each run a second or two."""
    data = tiny_table_data()
    data["base"]["model"] = {"name": "cnn"}
    data["base"]["partition"] = {"kind": "dirichlet", "alpha": 0.1, "clients": 20}
    data["base"]["fl"] = {"rounds": 8, "participation": 0.25, "local_steps": 5, "batch_size": 32}
    data["base"]["eval"] = {"every": 4, "train_subset": 200}
    # One torch thread in the runs, as the probe measures (asked for: left to `auto`, the count
    # is OMP_NUM_THREADS, which conftest sets to the cores, unless this process set one before).
    data["base"]["runtime"]["threads"] = 1
    data["grid"] = {"partition.alpha": [0.1, 1.0]}
    data["methods"] = {
        "FedAvg": {"algorithm": {"name": "fedavg", "lr": 0.05}},
        "FedAdamW": {"algorithm": {"name": "fedadamw", "lr": 3.0e-3}},
        "DP-FedAvg": {
            "algorithm": {"name": "dp_fedavg", "lr": 0.05, "grad_clip": None},
            "privacy": {"noise_multiplier": 1.0, "clip": 1.0},
        },
    }
    data["seeds"] = [0]
    return data


@pytest.mark.slow
@pytest.mark.engine
def test_the_probe_and_the_real_sweep_agree_within_2x(tmp_path: Path):
    plan = expand(parse_table_config(_newcomer_table()))
    # One torch thread for both, as a sweep's worker on a CPU has: a loaded machine's spinning
    # OpenMP threads would time noise.
    probe = Probe(plan.runs, budget=4.0, threads=1)
    estimated = [probe.seconds_of(run) for run in plan.runs]
    assert all(seconds is not None for seconds, _ in estimated), estimated
    estimate = sum(seconds for seconds, _ in estimated if seconds is not None)
    start = time.perf_counter()
    with kept_thread_state(1):  # in this process, one run at a time
        result = run_sweep(plan, tmp_path / "out", workers=1)
    wall = time.perf_counter() - start
    assert {o.status for o in result.outcomes.values()} == {"completed"}
    print(f"estimate {estimate:.1f} s, sweep {wall:.1f} s")
    assert 0.5 <= estimate / wall <= 2.0, (estimate, wall, probe.source("here"))


@pytest.mark.slow
@pytest.mark.engine
def test_the_estimate_of_a_sweep_of_two_workers_at_the_defaults_is_within_1_5x(tmp_path: Path):
    """As `make demo` runs: the newcomer's table at the default settings (the plan's threads and
    client processes), a sweep of two spawned workers, against `--estimate`'s figure for it
    (the probe with the sweep's layout and a stand-in for the other worker, the runs in the
    launcher's order over the workers, each worker's start included). The first progress line
    of `make demo` said "eta 7 min" for 2 min 18 s; the probe measured with the cores the other
    worker holds and without the workers' start."""
    data = _newcomer_table()
    del data["base"]["runtime"]["threads"]
    data["base"]["fl"]["rounds"] = 12
    plan = expand(parse_table_config(data))
    slots, threads = probe_slots(plan, 2)
    assert (slots, threads) == (2, max(1, (os.cpu_count() or 1) // 2))
    probe = Probe(plan.runs, budget=10.0, threads=threads, workers=slots)
    assert probe.worker_start_s is not None and probe.worker_start_s > 0
    ordered = workloads_first(plan.runs, [workload_key(run.cfg) for run in plan.runs])
    seconds = [probe.seconds_of(run)[0] for run in ordered]
    assert all(s is not None for s in seconds), probe.source("here")
    estimate = makespan([s for s in seconds if s is not None], slots, probe.worker_start_s)
    start = time.perf_counter()
    result = run_sweep(plan, tmp_path / "out", workers=2)
    wall = time.perf_counter() - start
    assert {o.status for o in result.outcomes.values()} == {"completed"}
    print(f"estimate {estimate:.1f} s, sweep {wall:.1f} s, load {os.getloadavg()[0]:.2f}")
    assert 1 / 1.5 <= estimate / wall <= 1.5, (estimate, wall, probe.source("here"))
