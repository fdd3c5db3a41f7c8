"""`--dry-run` prints the table's execution plans: one line per distinct plan and its rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.runner.execution_plans import execution_plan_lines
from fedbench.runner.sweep import make_plan

pytestmark = pytest.mark.engine


def test_the_quick_table_has_one_plan_for_every_row() -> None:
    plan = make_plan("table1", preset="quick", overrides=["runtime.device=cpu"])
    lines = list(execution_plan_lines(plan, data_missing=False))
    # One plan per model of the preset: the CNN keeps NHWC on the CPU, the linear model has no
    # convolution; every row shares them.
    assert lines[0].startswith("execution plans (2 distinct;")
    assert all(line.startswith("  FedAvg, SCAFFOLD, FedCM,") for line in lines[1:])
    assert all("executor sequential; precision fp32; compile off" in line for line in lines[1:])
    assert sorted("channels_last on" in line for line in lines[1:]) == [False, True]


def test_a_fallback_is_named_with_its_reason() -> None:
    plan = make_plan(
        "table1",
        preset="quick",
        overrides=["runtime.device=cpu", "runtime.engine=vectorized"],
        methods=["FedAvg"],
    )
    (_head, line) = execution_plan_lines(plan, data_missing=False)
    assert "executor vectorized" in line and "fallback" not in line


def test_without_the_data_the_plans_wait_for_the_run(tmp_path: Path, run_cli) -> None:
    code, out, _ = run_cli("run", "table1", "--dry-run", "--out", str(tmp_path))
    assert code == 0
    assert "execution plans: decided when the runs are prepared" in out
