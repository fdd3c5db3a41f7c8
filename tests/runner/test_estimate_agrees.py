"""`--estimate` is a plan's time a user can plan with: the probe and the real sweep agree."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from fedbench.runner.probe import Probe, torch_threads
from fedbench.runner.sweep import run_sweep
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
    with torch_threads(1):  # in this process, one run at a time
        result = run_sweep(plan, tmp_path / "out", workers=1)
    wall = time.perf_counter() - start
    assert {o.status for o in result.outcomes.values()} == {"completed"}
    print(f"estimate {estimate:.1f} s, sweep {wall:.1f} s")
    assert 0.5 <= estimate / wall <= 2.0, (estimate, wall, probe.source("here"))
