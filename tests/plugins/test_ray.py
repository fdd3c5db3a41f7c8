"""A plugin on Ray: the tasks run in Ray's worker processes, which know nothing of this
process's --plugin, and train the plugin's algorithm because the sweep sends them its list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedbench import plugins
from fedbench.runner.sweep import run_sweep
from fedbench.runner.table_config import expand, parse_table_config
from tests.conftest import tiny_table_data
from tests.runner.test_ray_launcher import ray_cluster  # noqa: F401  (the fixture)


@pytest.mark.slow
@pytest.mark.engine
def test_ray_tasks_load_the_drivers_plugins(
    ray_cluster: str,  # noqa: F811
    signum_file: Path,
    tmp_path: Path,
) -> None:
    plugins.declare([str(signum_file)])  # as `fedbench --plugin signum.py run ...` does
    table = tiny_table_data()
    table["methods"] = {"Signum": {"algorithm": {"name": "signum", "lr": 0.01}}}
    table["seeds"] = [0]
    plan = expand(parse_table_config(table))
    result = run_sweep(plan, tmp_path, launcher="ray", ray_address=ray_cluster)
    (outcome,) = result.outcomes.values()
    assert (outcome.status, outcome.error) == ("completed", None)
    assert outcome.node  # trained by a Ray task
    summary = json.loads((tmp_path / "runs" / outcome.run_id / "summary.json").read_text())
    assert summary["plugins"] == [plugins.loaded()[0].record()]
