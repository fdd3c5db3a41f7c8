"""The launcher with `runtime.seeds_together`: a cell's seeds go to one task, each run's outcome
and run folder are those of separate runs, and the queue settles and retries per run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from fedbench.engine.plan import seeds_group_size
from fedbench.runner.launcher import MAX_ATTEMPTS, Outcome, RunQueue, launch
from fedbench.runner.seed_groups import seed_groups
from fedbench.runner.table_config import expand, parse_table_config
from tests.conftest import read_metrics, strip_elapsed, tiny_table_data
from tests.runner.test_launcher import (
    ROUNDS,
    attempts,
    checkpointed_round,
    fault_table,
    poll,
    sweep_command,
    undisturbed_metrics,
)


def _plan(seeds_together: int | str, seeds: list[int]):
    data = tiny_table_data()
    data["seeds"] = seeds
    data["base"]["runtime"].update(engine="vectorized", seeds_together=seeds_together)
    return expand(parse_table_config(data))


def test_groups_hold_the_seeds_of_one_cell() -> None:
    plan = _plan(2, [0, 1, 2])  # 2 methods x 3 seeds
    groups = seed_groups(plan.runs, gpus=False)
    assert [[run.seed for run in group] for group in groups] == [[0, 1], [2], [0, 1], [2]]
    assert all(len({run.method for run in group}) == 1 for group in groups)
    auto = _plan("auto", [0, 1, 2])
    assert [len(g) for g in seed_groups(auto.runs, gpus=True)] == [3, 3]
    assert [len(g) for g in seed_groups(auto.runs, gpus=False)] == [1] * 6
    one = _plan(1, [0, 1, 2]).runs[0].cfg
    assert seeds_group_size(one, 5, gpus=True) == 1


def test_a_sequential_engine_asked_for_keeps_each_seed_its_own_task() -> None:
    """The plan's rule, not the config's: `runtime.engine: sequential` with seeds_together is
    a config that loads (it once was refused by the config), and the launcher groups nothing."""
    data = tiny_table_data()
    data["seeds"] = [0, 1, 2]
    data["base"]["runtime"].update(engine="sequential", seeds_together=3)
    runs = expand(parse_table_config(data)).runs
    assert seeds_group_size(runs[0].cfg, 3, gpus=True) == 1
    assert [len(g) for g in seed_groups(runs, gpus=True)] == [1] * 6


def test_the_queue_settles_each_run_and_retries_the_failed_ones_together() -> None:
    plan = _plan(3, [0, 1, 2])
    groups = seed_groups(plan.runs, gpus=False)
    queue = RunQueue(plan.runs, groups)
    assert len(queue.todo) == 2
    task = queue.pop()
    a, b, c = task.runs
    steps = queue.settle_all(
        task,
        [Outcome(a.run_id, "completed"), Outcome(b.run_id, "failed"), Outcome(c.run_id, "busy")],
    )
    assert steps == ["done", "retry", "wait"]
    assert queue.outcomes[a.run_id].status == "completed"
    busy, retry = queue.todo[-2], queue.todo[-1]
    assert busy.runs == [c] and busy.wait
    assert retry.runs == [b] and retry.attempt == MAX_ATTEMPTS


@pytest.mark.parametrize("workers", [1, 2])
def test_a_sweep_with_seeds_together_writes_what_separate_runs_write(
    workers: int, tmp_path: Path
) -> None:
    together = launch(_plan(2, [0, 1]), tmp_path / "together", workers=workers)
    alone = launch(_plan(1, [0, 1]), tmp_path / "alone", workers=1)
    assert together.keys() == alone.keys()  # seeds_together changes no run id
    assert [o.status for o in together.values()] == ["completed"] * 4
    assert [o.together for o in together.values()] == [2] * 4
    for run_id in together:
        rows = strip_elapsed(read_metrics(tmp_path / "together" / "runs" / run_id))
        expected = strip_elapsed(read_metrics(tmp_path / "alone" / "runs" / run_id))
        assert len(rows) == len(expected)
        for row, want in zip(rows, expected, strict=True):
            assert row == pytest.approx(want, rel=1e-5, abs=1e-6)
    again = launch(_plan(2, [0, 1]), tmp_path / "together", workers=workers)
    assert all(o.cached for o in again.values())  # finished runs are skipped


@pytest.mark.slow
def test_a_killed_worker_retries_its_seeds_together_from_their_checkpoints(tmp_path: Path):
    data = yaml.safe_load(fault_table(tmp_path, [0, 1, 2, 3]).read_text())
    data["base"]["runtime"].update(engine="vectorized", seeds_together=2)
    table = tmp_path / "together.yaml"
    table.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / "out"
    proc = subprocess.Popen(
        sweep_command(table, out, workers=2),
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
    # Both seeds of the killed worker's group died with it and were retried (together).
    assert stdout.count("worker process died (killed by SIGKILL); retrying once") == 2
    pid = json.loads((victim / "attempt.json").read_text())["pid"]
    group = [
        d for d in out.glob("runs/*") if json.loads((d / "attempt.json").read_text())["pid"] == pid
    ]
    assert len(group) == 2 and all(attempts(d) == 2 for d in group)
    for run_dir in out.glob("runs/*"):
        rows = strip_elapsed(read_metrics(run_dir))
        assert len(rows) == ROUNDS + 1
        expected = undisturbed_metrics(run_dir, tmp_path / "alone", threads=1)
        for row, want in zip(rows, expected, strict=True):
            assert row == pytest.approx(want, rel=1e-5, abs=1e-6)
