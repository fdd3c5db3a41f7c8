"""A plugin named only on this process's command line trains in a sweep's spawned workers:
they know it from the list the launcher sends them (not from their environment, nor from a
re-import of a script)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fedbench import plugins
from tests.conftest import tiny_table_data


@pytest.mark.slow
@pytest.mark.engine
def test_spawned_workers_load_the_plugins_of_the_command(
    signum_file: Path, tmp_path: Path, run_cli
) -> None:
    table = tiny_table_data()
    table["methods"]["Signum"] = {"algorithm": {"name": "signum", "lr": 0.01}}
    table["seeds"] = [0]
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(table, sort_keys=False))
    out = tmp_path / "out"
    args = ["run", str(path), "--workers", "2", "--out", str(out)]
    code, stdout, err = run_cli("--plugin", str(signum_file), *args)
    assert code == 0, stdout + err
    runs = json.loads((out / "tiny" / "plan.json").read_text())["runs"]
    assert sorted((r["method"], r["status"]) for r in runs) == [
        ("FedAdamW", "completed"),
        ("Local SGD", "completed"),
        ("Signum", "completed"),
    ]
    (signum,) = [r for r in runs if r["method"] == "Signum"]
    summary = json.loads((out / "runs" / signum["run_id"] / "summary.json").read_text())
    assert summary["plugins"] == [plugins.loaded()[0].record()]


@pytest.mark.slow
@pytest.mark.engine
def test_a_plugin_that_fails_in_a_worker_fails_its_runs_with_its_line(
    signum_file: Path, tmp_path: Path, run_cli
) -> None:
    # Loads here, fails in every spawned worker: the runs fail with the plugin's one line
    # (not "worker process died"), and the sweep goes on and exits 1.
    signum_file.write_text(
        signum_file.read_text() + "\nimport multiprocessing\n\n"
        "if multiprocessing.parent_process() is not None:\n"
        "    raise RuntimeError('not in a worker')\n"
    )
    table = tiny_table_data()
    table["methods"] = {"Signum": {"algorithm": {"name": "signum", "lr": 0.01}}}
    table["seeds"] = [0, 1]
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(table, sort_keys=False))
    args = ["run", str(path), "--workers", "2", "--out", str(tmp_path / "out")]
    code, stdout, err = run_cli("--plugin", str(signum_file), *args)
    assert code == 1, err
    line = (
        f"plugin {signum_file} (--plugin) failed to load (RuntimeError: not in a worker); fix "
        "it, or drop that --plugin"
    )
    failed = [text for text in stdout.splitlines() if text.startswith("  failed: Signum")]
    assert [text.endswith(f"): {line}") for text in failed] == [True, True], stdout
    assert "worker process died" not in stdout
