"""The sweep's ETA is per workload: `make demo`'s first line said "eta 7 min" for a 2 min 18 s
sweep, extrapolating its first (CNN) runs over runs half of which train a logistic regression."""

from __future__ import annotations

import io

from rich.console import Console

from fedbench.runner.launcher import Outcome, RunQueue
from fedbench.runner.sweep_progress import SweepProgress, workload_key, workloads_first
from fedbench.runner.table_config import expand, parse_table_config
from tests.conftest import tiny_table_data


def _plan():
    """4 runs: FedAvg and FedAdamW on the logistic regression, then on the CNN (one seed)."""
    data = tiny_table_data()
    data["grid"] = {"model.name": ["logreg", "cnn"]}
    data["seeds"] = [0]
    return expand(parse_table_config(data))


def test_workloads_first_moves_the_first_task_of_each_workload_to_the_front():
    assert workloads_first(list("abcde"), ["x", "x", "y", "x", "z"]) == list("acebd")
    assert workloads_first([], []) == []


def test_the_queue_starts_the_first_run_of_each_workload_first():
    plan = _plan()
    keys = [workload_key(run.cfg) for run in plan.runs]
    assert len(set(keys)) == 2  # the algorithm does not set a workload; the model does
    queue = RunQueue(plan.runs)
    order = [queue.pop().run for _ in plan.runs]
    assert len({workload_key(run.cfg) for run in order[:2]}) == 2
    assert sorted(run.run_id for run in order) == sorted(run.run_id for run in plan.runs)


def test_the_eta_waits_for_a_run_of_every_workload_left_and_prices_each_run_by_its_own():
    plan = _plan()
    queue = RunQueue(plan.runs)
    order = [queue.pop().run for _ in plan.runs]  # logreg, cnn, logreg, cnn
    buffer = io.StringIO()
    progress = SweepProgress(Console(file=buffer, width=300), len(order), 2, "t", order)
    seconds = {"logreg": 10.0, "cnn": 30.0}
    steps = order[0].client_steps()
    assert all(run.client_steps() == steps for run in order)
    first = order[0]
    progress.update(first, Outcome(first.run_id, "completed", wall_s=seconds[first.cfg.model.name]))
    # One workload measured, the other not: no ETA (one mean would say 3x off either way).
    assert "eta" not in buffer.getvalue()
    second = order[1]
    progress.update(
        second, Outcome(second.run_id, "completed", wall_s=seconds[second.cfg.model.name])
    )
    # Left: one logreg run (10 s) and one CNN run (30 s) on 2 workers: 20 s.
    assert buffer.getvalue().splitlines()[-1].endswith("; eta 20 s")
    third = order[2]
    # A run 2x slower than its workload's first: its workload's rate is now their mean.
    progress.update(
        third, Outcome(third.run_id, "completed", wall_s=2 * seconds[third.cfg.model.name])
    )
    last = order[3]
    assert last.cfg.model.name != third.cfg.model.name
    assert (
        buffer.getvalue().splitlines()[-1].endswith(f"; eta {seconds[last.cfg.model.name]:.0f} s")
    )


def test_cached_runs_leave_the_eta_and_runs_trained_together_count_their_share():
    plan = _plan()
    runs = plan.runs
    progress = SweepProgress(None, len(runs), 1, "t", runs)
    logreg = [r for r in runs if r.cfg.model.name == "logreg"]
    cnn = [r for r in runs if r.cfg.model.name == "cnn"]
    assert len(logreg) == len(cnn) == 2
    progress.finished("a", Outcome(logreg[0].run_id, "completed", cached=True))
    progress.finished("b", Outcome(cnn[0].run_id, "completed", wall_s=40.0, together=2))
    assert progress.eta() == ""  # logreg has no run trained here
    progress.finished("c", Outcome(logreg[1].run_id, "completed", wall_s=6.0))
    # One CNN run left at 40 / 2 = 20 s.
    assert progress.eta() == "eta 20 s"
