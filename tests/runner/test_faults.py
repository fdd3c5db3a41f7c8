"""Sweeps and tunes under faults: report folders of concurrent plans, a run on a full disk,
malformed tune flags and config text, and the fault script (benchmarks/faults, a package): one
of its cases end to end, and its command line."""

from __future__ import annotations

import errno
import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fedbench.config import read_yaml
from fedbench.engine.run_folder import RunFolder
from fedbench.errors import FedbenchError
from fedbench.runner.launcher import launch
from fedbench.runner.report_folder import claim_report_folder, plan_fingerprint
from fedbench.runner.sweep import run_sweep, write_plan
from fedbench.runner.table_config import expand, parse_table_config
from fedbench.runner.tune import STUDY_FILE, parse_grid, parse_space, tune
from tests.conftest import ROOT, tiny_table_data


def _plan(seeds: list[int], methods: list[str] | None = None):
    return expand(parse_table_config(tiny_table_data()), seeds=seeds, methods=methods)


def test_a_running_sweep_of_another_plan_keeps_its_report_folder(tmp_path: Path):
    a, b = _plan([0, 1]), _plan([1])
    folder = tmp_path / "tiny"
    notes: list[str] = []
    with claim_report_folder(folder, a, lambda f: write_plan(a, f)) as held_a:
        assert held_a == folder
        # The same plan shares the folder: both sweeps write the same report.
        with claim_report_folder(folder, a, lambda f: write_plan(a, f)) as shared:
            assert shared == folder
        with claim_report_folder(folder, b, lambda f: write_plan(b, f), notes.append) as held_b:
            assert held_b == tmp_path / f"tiny-{plan_fingerprint(b)[:8]}"
        assert "holds the report of another plan of tiny" in notes[0] and str(held_b) in notes[0]
        seeds = {r["seed"] for r in yaml.safe_load((folder / "plan.json").read_text())["runs"]}
        assert seeds == {0, 1}  # A's plan.json was not touched by B
    # Once no sweep holds it, the next plan takes the folder over, as a rerun always has.
    with claim_report_folder(folder, b, lambda f: write_plan(b, f)) as again:
        assert again == folder
    assert plan_fingerprint(a) != plan_fingerprint(b) == plan_fingerprint(_plan([1]))


def test_a_sweep_whose_run_hits_a_full_disk_reports_the_others(tmp_path: Path, monkeypatch):
    plan = _plan([0], methods=["Local SGD", "FedAdamW"])
    victim = plan.runs[1].run_id
    real_append = RunFolder.append_metrics

    def full_disk(self, row):
        if self.path.name == victim:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.metrics))
        real_append(self, row)

    monkeypatch.setattr(RunFolder, "append_metrics", full_disk)
    result = run_sweep(plan, tmp_path, workers=1, report=True)
    statuses = {run.method: result.outcomes[run.run_id].status for run in plan.runs}
    assert statuses == {"Local SGD": "completed", "FedAdamW": "failed"}
    assert "No space left on device" in result.outcomes[victim].error
    assert result.report is not None and (result.folder / "summary.csv").is_file()
    assert not list(tmp_path.rglob("*.tmp"))


def test_tune_flags_that_cannot_work_are_one_line_and_write_nothing(tmp_path: Path):
    with pytest.raises(FedbenchError, match="not valid YAML"):
        parse_grid("algorithm.lr=[1")
    for spec in ("log:1e-4:inf", "uniform:-inf:1", "uniform:0:nan"):
        with pytest.raises(FedbenchError, match="finite"):
            parse_space(f"algorithm.lr={spec}")
    plan = _plan([0], methods=["Local SGD"])
    for field, match in (
        (parse_space("algorithm.lr=uniform:-1:1"), "lr"),
        (parse_grid("algorithm.no_such_field=1,2"), "no_such_field"),
    ):
        with pytest.raises(FedbenchError, match=match):
            tune(
                plan,
                [field],
                out=tmp_path,
                trials=1,
                rounds=1,
                val_fraction=0.2,
                launch=lambda p: launch(p, tmp_path, workers=1),
            )
    assert not list(tmp_path.rglob(STUDY_FILE)) and not list(tmp_path.iterdir())


def test_yaml_that_is_not_utf8_is_one_line(tmp_path: Path):
    path = tmp_path / "cfg.yaml"
    path.write_bytes(b"seed: 0\nfl:\n  rounds: \xff3\n")
    with pytest.raises(FedbenchError, match=r"not UTF-8 text \(byte 0xff at offset 22\)"):
        read_yaml(path)


def _fault_harness():
    """benchmarks.faults.harness of this checkout (opacus installs an unrelated top-level
    `benchmarks` package; the checkout's, a regular package first on the path, must win)."""
    harness = importlib.import_module("benchmarks.faults.harness")
    assert Path(harness.__file__).is_relative_to(ROOT / "benchmarks" / "faults")
    return harness


def test_the_fault_script_finds_a_read_only_out_one_clean_line(tmp_path: Path):
    """One case of the fault script, through its own fault injection: `fedbench train` into a
    read-only --out is exit code 2 and one line."""
    faults = _fault_harness()
    fb = faults.Fedbench(ROOT, tmp_path)
    cfg = faults.write_yaml(tmp_path / "run.yaml", faults.RUN_CONFIG)
    out = tmp_path / "ro"
    fault = {"FEDBENCH_FAULT_DIR": str(out), "FEDBENCH_FAULT_KIND": "rofs"}
    res = fb("train", str(cfg), "--set", "fl.rounds=1", "--out", str(out / "o"), fault=fault)
    assert faults.one_clean_line(res) is None, res.err
    assert "Read-only file system (EROFS)" in res.err and "give a writable folder" in res.err
    assert not out.exists()


def test_the_fault_script_runs_as_a_module_and_from_its_folder(tmp_path: Path):
    """`python -m benchmarks.faults` (in the checkout) and `python benchmarks/faults` (from any
    folder) both start the script, whose kinds of fault each live in a module of their own."""
    cases = importlib.import_module("benchmarks.faults.__main__").CASES
    modules = {case.__module__ for case in cases.values()}
    assert len(modules) == 15 and all(m.startswith("benchmarks.faults.") for m in modules)
    assert not modules & {"benchmarks.faults.__main__", "benchmarks.faults.harness"}
    for command, cwd in (
        ([sys.executable, "-m", "benchmarks.faults", "--help"], ROOT),
        ([sys.executable, str(ROOT / "benchmarks" / "faults"), "--help"], tmp_path),
    ):
        res = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        assert res.stdout.startswith("usage: python -m benchmarks.faults")
        assert all(name in res.stdout for name in cases), res.stdout
