"""`--dry-run` is a plan before the data exists: the runs, their client steps and an estimated
time with its source, then what is missing as a warning (exit 2 only when training is asked)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fedbench.config import load_run_config
from fedbench.runner.bench_suite import device_name, slug
from fedbench.runner.estimate import duration, match, probe_config
from fedbench.runner.table_config import expand, parse_table_config
from tests.conftest import tiny_table_data
from tests.runner.test_preflight import table_without_data, write_table

CPU = device_name(torch.device("cpu"))


def _cifar_table(tmp_path: Path) -> Path:
    """The tiny table on CIFAR-100 (absent) with the suite's two models: 2 methods x 2 models x
    2 seeds = 8 runs of 3 rounds x 2 clients x 2 steps = 12 client steps each."""
    data = table_without_data(tmp_path)
    data["base"]["model"] = {"name": "resnet18", "norm": "bn"}
    data["grid"] = {"model.name": ["resnet18", "vit_tiny"]}
    return write_table(tmp_path, data)


def _figures(folder: Path, **extra) -> Path:
    rows = [
        {
            "workload": workload,
            "engine_requested": "sequential",
            "precision": "fp32",
            "compile": False,
            "batch_size": 16,
            "client_steps_per_s": rate,
        }
        for workload, rate in (("resnet18_bn", 0.5), ("vit_tiny", 2.0))
    ]
    path = folder / "benchmarks" / "results" / f"{slug(CPU)}.json"
    path.parent.mkdir(parents=True)
    data = {"suite": "table1", "device": CPU, "torch": "2.x", "rows": rows, **extra}
    path.write_text(json.dumps(data))
    return path


def test_a_plan_needs_no_data(tmp_path: Path, run_cli, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # no benchmark figures here
    path = _cifar_table(tmp_path)
    out = tmp_path / "o"
    code, stdout, err = run_cli("run", str(path), "--dry-run", "--set", "runtime.device=cpu")
    assert code == 0, err
    assert "8 runs (8 distinct), 96 client steps" in stdout
    assert f"estimate: none; no measurement for this device ({CPU}): use --estimate" in stdout
    # No file here; a CPU whose suite fedbench ships (measured under load) is named as such.
    assert "fedbench bench --suite table1" in stdout
    assert "does not exist" in stdout or "is marked unrepresentative" in stdout
    lines = err.strip().splitlines()
    assert lines[0].startswith("warning: tiny: 1 missing on this machine")
    assert "exit 2" in lines[0]
    assert "dataset cifar100 not found" in lines[1] and lines[1].endswith("[needed by 8 runs]")
    assert not out.exists() and not (tmp_path / "results").exists()
    # Training is asked for: the same check stops it.
    code, _, err = run_cli("run", str(path), "--out", str(out))
    assert code == 2 and "dataset cifar100 not found" in err and not out.exists()


def test_the_estimate_uses_this_devices_figures_and_names_them(
    tmp_path: Path, run_cli, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    figures = _figures(tmp_path, measured_at="2026-01-02 03:04 UTC")
    path = _cifar_table(tmp_path)
    code, stdout, _ = run_cli("run", str(path), "--dry-run", "--set", "runtime.device=cpu")
    assert code == 0
    # 4 ResNet runs x 12 steps / 0.5 per s + 4 ViT runs x 12 / 2.0 = 96 s + 24 s = 2 min.
    assert "estimate: 2 min of training for 8 of 8 runs to train (96 client steps" in stdout
    assert "resnet18_bn sequential fp32: 0.5 client steps/s" in stdout
    assert "vit_tiny sequential fp32: 2 client steps/s" in stdout
    source = next(line for line in stdout.splitlines() if "source:" in line)
    assert str(figures.relative_to(tmp_path)) in source
    assert f"device {CPU}" in source and "measured: 2026-01-02 03:04 UTC" in source
    # A workload the figures do not cover is named, not guessed.
    code, stdout, _ = run_cli(
        "run", str(path), "--dry-run", "--set", "runtime.device=cpu", "--set", "fl.batch_size=32"
    )
    assert "estimate: none;" in stdout
    assert "8 with B 32 (measured at B 16)" in stdout


def test_figures_marked_unrepresentative_are_never_read(
    tmp_path: Path, run_cli, monkeypatch
) -> None:
    """A suite measured on a loaded machine gave Table 1 '463,320.6 h'; its own note said the
    throughput was not representative."""
    monkeypatch.chdir(tmp_path)
    note = "measured at load average 25 on 2 cores"
    _figures(tmp_path, representative=False, note=note)
    code, stdout, _ = run_cli(
        "run", str(_cifar_table(tmp_path)), "--dry-run", "--set", "runtime.device=cpu"
    )
    assert code == 0
    assert f"estimate: none; no measurement for this device ({CPU}): use --estimate" in stdout
    assert f"is marked unrepresentative ({note})" in stdout
    assert "client steps/s" not in stdout and "estimate: 2 min" not in stdout


def test_a_cpu_suite_measured_under_load_is_marked_unrepresentative(
    tmp_path: Path, monkeypatch
) -> None:
    from fedbench.runner import bench_suite

    def fake_row(config, engine, precision, compiled, sets, options, timeout_s=None, graphs="auto"):
        return {"client_steps_per_s": 2.0, "engine_peak_mem_mb": 1.0, "precision": precision}

    monkeypatch.setattr(bench_suite, "_row", fake_row)
    monkeypatch.setattr(bench_suite, "write_random_cifar", lambda path: None)
    monkeypatch.setattr(bench_suite.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(bench_suite.os, "cpu_count", lambda: 2)
    for load, representative in ((25.0, False), (1.5, True)):
        monkeypatch.setattr(bench_suite.os, "getloadavg", lambda load=load: (load, 0.0, 0.0))
        _, result = bench_suite.run_suite(
            "table1", sets=[], rounds=1, warmup=0, repeats=1, threads=None, out_dir=tmp_path
        )
        assert result["representative"] is representative and result["load_average"] == load
        assert ("note" in result) is not representative


def test_match_says_why_a_run_has_no_figure() -> None:
    rows = [
        {
            "workload": "resnet18_bn",
            "engine_requested": "sequential",
            "precision": "fp32",
            "compile": False,
            "batch_size": 50,
            "client_steps_per_s": 3.0,
        }
    ]
    base = ["data.name=cifar10", "model.name=resnet18", "model.norm=bn", "fl.batch_size=50"]
    assert match(load_run_config(None, base), rows) == (rows[0], "")
    why = {
        "model.name=cnn": "model cnn",
        "data.name=fmnist": "data fmnist",
        "runtime.precision=bf16": "resnet18_bn sequential bf16 (not measured)",
    }
    for extra, reason in why.items():
        assert match(load_run_config(None, [*base, extra]), rows) == (None, reason)


def test_a_graphed_row_stands_only_for_runs_that_allow_graphs() -> None:
    row = {
        "workload": "resnet18_bn",
        "engine_requested": "vectorized",
        "precision": "bf16",
        "compile": False,
        "batch_size": 50,
        "client_steps_per_s": 900.0,
        "cuda_graphs_requested": "on",
    }
    eager = {**row, "client_steps_per_s": 160.0, "cuda_graphs_requested": "off"}
    base = ["data.name=cifar10", "model.name=resnet18", "model.norm=bn", "fl.batch_size=50"]
    base += ["runtime.engine=vectorized", "runtime.precision=bf16"]
    rows = [row, eager]
    assert match(load_run_config(None, base), rows)[0] is row  # auto: graphed where it can
    off = load_run_config(None, [*base, "runtime.cuda_graphs=off"])
    assert match(off, rows)[0] is eager


def test_durations_read_well() -> None:
    assert [duration(s) for s in (40, 719, 3600 * 41.26)] == ["40 s", "12 min", "41.3 h"]
    assert [duration(s) for s in (60, 138.4, 599.6)] == ["1 min", "2 min 18 s", "10 min"]


def test_a_probe_shrinks_the_run_and_stands_in_for_missing_images(tmp_path: Path) -> None:
    table = parse_table_config(table_without_data(tmp_path))
    run = expand(table).runs[0]
    cfg = probe_config(run.cfg, tmp_path)
    assert (cfg.fl.local_steps, cfg.fl.batch_size) == (2, 16)
    assert cfg.data.name == "npz" and cfg.partition.clients == 2 and cfg.fl.participation == 1.0
    arrays = dict(np.load(cfg.data.path))
    # Two full batches per probe client (64), and every one of CIFAR-100's classes once.
    assert arrays["x_train"].shape == (100, 3, 32, 32) and arrays["y_train"].max() == 99
    assert cfg.model == run.cfg.model and cfg.algorithm == run.cfg.algorithm


@pytest.mark.engine
def test_estimate_probes_each_workload_once(tmp_path: Path, run_cli, tiny_table_path) -> None:
    code, stdout, err = run_cli(
        "run", str(tiny_table_path), "--estimate", "--out", str(tmp_path / "o")
    )
    assert code == 0, err
    # Both rows train logreg on digits at B 16: one workload, one probe.
    assert stdout.count("probing ") == 1 and "probing logreg/digits B 16 sequential fp32" in stdout
    estimate = next(line for line in stdout.splitlines() if line.startswith("estimate:"))
    assert "for 4 of 4 runs to train (48 client steps" in estimate
    assert "logreg/digits B 16 sequential fp32:" in estimate
    assert "a probe measured now on " in stdout
    assert "checked before training: datasets digits" in stdout
    assert not (tmp_path / "o").exists()


def test_finished_runs_cost_nothing(tmp_path: Path, monkeypatch) -> None:
    from fedbench.engine.run_folder import RunFolder
    from fedbench.runner.estimate import estimate_lines

    plan = expand(parse_table_config(tiny_table_data()))
    for run in plan.runs:
        folder = RunFolder.for_config(tmp_path, run.cfg)
        folder.path.mkdir(parents=True, exist_ok=True)
        folder.summary.write_text('{"status": "completed"}')
    assert estimate_lines(plan, tmp_path) == ["estimate: nothing to train (every run is finished)"]


def test_the_committed_suite_files_that_call_themselves_unrepresentative_are_marked() -> None:
    from fedbench.runner.estimate import load_figures

    root = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    for path in root.glob("*.json"):
        figures = load_figures(path)
        if figures is not None and "not representative" in str(figures.data.get("note")):
            assert not figures.representative, path
