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


@pytest.mark.slow
@pytest.mark.engine
def test_a_plugin_that_fails_on_a_node_fails_its_run_with_its_line(
    ray_cluster: str,  # noqa: F811
    signum_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Loads in this process (which has the variable), fails in the Ray workers (which do not).
    monkeypatch.setenv("FEDBENCH_TEST_DRIVER", "1")
    signum_file.write_text(
        signum_file.read_text() + "\nimport os\n\n"
        "if os.environ.get('FEDBENCH_TEST_DRIVER') != '1':\n"
        "    raise RuntimeError('not on this node')\n"
    )
    plugins.declare([str(signum_file)])
    table = tiny_table_data()
    table["methods"] = {"Signum": {"algorithm": {"name": "signum", "lr": 0.01}}}
    table["seeds"] = [0]
    result = run_sweep(
        expand(parse_table_config(table)), tmp_path, launcher="ray", ray_address=ray_cluster
    )
    (outcome,) = result.outcomes.values()
    assert (outcome.status, outcome.error) == (
        "failed",
        f"plugin {signum_file} (--plugin) failed to load (RuntimeError: not on this node); fix "
        "it, or drop that --plugin",
    )
