"""`--estimate` is a plan's time a user can plan with: the probe and the real sweep agree."""

from __future__ import annotations

import os

import pytest

from fedbench.runner.estimate import makespan
from fedbench.runner.probe import Probe
from fedbench.runner.sweep import probe_slots
from fedbench.runner.sweep_progress import workload_key, workloads_first
from fedbench.runner.table_config import expand, parse_table_config
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


# How close `--estimate` comes to the real time is a performance target, measured by
# benchmarks/demo_estimate.py (make demo's sweep, quiet and beside busy loops: within 1.5x either
# way), not by a timed test: on a loaded CI machine a wall-clock ratio says more about the load
# than about the estimate. What the estimate is made of is checked here, exactly.


@pytest.mark.slow
@pytest.mark.engine
def test_the_estimate_of_a_sweep_of_two_workers_is_its_probe_on_the_sweeps_layout():
    """As `make demo` runs: the newcomer's table at the default settings, a sweep of two spawned
    workers. The probe measures with the sweep's layout (its share of the cores, one torch thread
    each on 2 cores) beside a stand-in for the other worker, which also times a worker's start;
    the estimate is the makespan of the runs, in the launcher's order, over the two workers, each
    worker's start included."""
    data = _newcomer_table()
    del data["base"]["runtime"]["threads"]
    plan = expand(parse_table_config(data))
    slots, threads = probe_slots(plan, 2)
    assert (slots, threads) == (2, max(1, (os.cpu_count() or 1) // 2))
    probe = Probe(plan.runs, budget=4.0, threads=threads, workers=slots)
    assert probe.worker_start_s is not None and probe.worker_start_s > 0
    assert "beside 1 busy process(es) for the sweep's other workers" in probe.source("here")[0]
    ordered = workloads_first(plan.runs, [workload_key(run.cfg) for run in plan.runs])
    seconds = [probe.seconds_of(run)[0] for run in ordered]
    assert all(s is not None and s > 0 for s in seconds), probe.source("here")
    # The two workloads (plain and private) were each timed once; runs of one share its rate.
    assert len(set(seconds)) == 2
    estimate = makespan([s for s in seconds if s is not None], slots, probe.worker_start_s)
    per_worker = sum(s for s in seconds if s is not None) / slots
    longest = max(s for s in seconds if s is not None)
    assert (
        per_worker + probe.worker_start_s <= estimate <= per_worker + longest + probe.worker_start_s
    )
