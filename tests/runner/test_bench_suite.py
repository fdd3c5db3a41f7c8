"""`fedbench bench --suite table1`: rows, the Table 1 projection and the results file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
import yaml

from fedbench.errors import FedbenchError
from fedbench.runner import bench_suite
from fedbench.runner.bench_suite import TABLE1_CLIENT_STEPS, projection, run_suite, slug


def test_table1_is_24_million_client_steps() -> None:
    assert TABLE1_CLIENT_STEPS == 24_000_000


def test_slug_is_file_name_safe() -> None:
    assert slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert slug("CPU Intel(R) Xeon(R) @ 2.20GHz") == "cpu-intel-r-xeon-r-2-20ghz"


def _row(workload: str, engine: str, rate: float) -> dict:
    return {
        "workload": workload,
        "engine_requested": engine,
        "precision": "fp32",
        "client_steps_per_s": rate,
    }


def test_projection_sums_half_of_table1_per_model() -> None:
    rows = [
        _row("resnet18_bn", "sequential", 100.0),
        _row("vit_tiny", "sequential", 400.0),
        _row("resnet18_bn", "vectorized", 200.0),
        _row("vit_tiny", "vectorized", 300.0),
    ]
    hours = projection(rows)
    # 12M steps / 100 per s + 12M / 400 per s = 120,000 s + 30,000 s = 41.67 h.
    assert hours["sequential/fp32"] == pytest.approx(150_000 / 3600, abs=0.01)
    assert hours["vectorized/fp32"] == pytest.approx((60_000 + 40_000) / 3600, abs=0.01)
    # Fastest per model: 200 (vectorized ResNet) and 400 (sequential ViT).
    assert hours["best_per_model"] == pytest.approx((60_000 + 30_000) / 3600, abs=0.01)


def test_suite_writes_one_file_per_device(tmp_path: Path, monkeypatch) -> None:
    seen = []

    def fake_row(
        config: Path,
        engine: str,
        precision: str,
        compiled: bool,
        sets,
        options,
        timeout_s=None,
        graphs="auto",
    ) -> dict:
        cfg = yaml.safe_load(config.read_text())
        seen.append((cfg["model"]["name"], engine, precision, tuple(sets), tuple(options)))
        assert cfg["fl"] == {
            "rounds": 300,
            "participation": 0.1,
            "local_steps": 50,
            "batch_size": 50,
        }
        assert Path(cfg["data"]["path"]).is_file()
        return {"client_steps_per_s": 50.0, "engine_peak_mem_mb": 1.0, "precision": precision}

    monkeypatch.setattr(bench_suite, "_row", fake_row)
    path, result = run_suite(
        "table1",
        sets=["fl.local_steps=2"],
        rounds=1,
        warmup=0,
        repeats=1,
        threads=None,
        out_dir=tmp_path,
    )
    on_gpu = torch.cuda.is_available()
    assert len(seen) == 2 * (5 if on_gpu else 2)
    assert {s[0] for s in seen} == {"resnet18", "vit_tiny"}
    assert all(s[3] == ("fl.local_steps=2",) for s in seen)
    assert json.loads(path.read_text()) == result
    assert path.parent == tmp_path and path.name == f"{slug(result['device'])}.json"
    assert result["scaled_down"] and result["torch"] == torch.__version__
    # When, for the dry run's estimate to name its source.
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", result["measured_at"])
    assert result["rows"][0]["ms_per_client_step"] == pytest.approx(20.0)
    # 24M steps at 50 steps/s = 133.33 hours for every engine.
    assert result["projected_table1_hours"]["sequential/fp32"] == pytest.approx(133.33, abs=0.01)


def test_unknown_suite_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(FedbenchError, match="table1"):
        run_suite("table9", sets=[], rounds=1, warmup=0, repeats=1, threads=None, out_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_suite_with_a_config_exits_2(tmp_path: Path, run_cli) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("seed: 0\n")
    code, _, err = run_cli("bench", str(config), "--suite", "table1", "--out", str(tmp_path / "r"))
    assert code == 2 and "--suite" in err
    assert not (tmp_path / "r").exists()


def test_a_failed_row_is_recorded_and_the_suite_goes_on(tmp_path: Path, monkeypatch) -> None:
    calls = []
    files_seen = []

    def fake_row(
        config, engine, precision, compiled, sets, options, timeout_s=None, graphs="auto"
    ) -> dict:
        calls.append(timeout_s)
        # The file already holds every earlier row when the next one starts.
        written = list(tmp_path.glob("*.json"))
        files_seen.append(len(json.loads(written[0].read_text())["rows"]) if written else 0)
        if "vit_tiny" in str(config):
            return {"error": "timed out after 7 s", "precision": precision}
        return {"client_steps_per_s": 100.0, "engine_peak_mem_mb": 1.0, "precision": precision}

    monkeypatch.setattr(bench_suite, "_row", fake_row)
    _path, result = run_suite(
        "table1",
        sets=[],
        rounds=1,
        warmup=0,
        repeats=1,
        threads=None,
        out_dir=tmp_path,
        row_timeout_s=7,
    )
    assert set(calls) <= {7, 7 + bench_suite.COMPILE_ALLOWANCE_S}
    assert files_seen == list(range(len(calls)))
    assert result["complete"] is True
    errors = [r for r in result["rows"] if "error" in r]
    assert {r["workload"] for r in errors} == {"vit_tiny"}
    assert all("ms_per_client_step" not in r for r in errors)
    # No variant has both models, so no per-variant hours and no best: nothing is invented.
    assert result["projected_table1_hours"] == {}


def test_rows_run_variant_major(tmp_path: Path, monkeypatch) -> None:
    order = []

    def fake_row(
        config, engine, precision, compiled, sets, options, timeout_s=None, graphs="auto"
    ) -> dict:
        order.append((Path(config).stem, engine))
        return {"client_steps_per_s": 10.0, "engine_peak_mem_mb": 1.0, "precision": precision}

    monkeypatch.setattr(bench_suite, "_row", fake_row)
    run_suite("table1", sets=[], rounds=1, warmup=0, repeats=1, threads=None, out_dir=tmp_path)
    assert order[:2] == [("resnet18_bn", "sequential"), ("vit_tiny", "sequential")]


def test_cuda_suites_measure_the_graphed_vectorized_step_second() -> None:
    """Right after the fp32 baseline (a suite cut short by its time limit still has it), under
    its own key; the eager vectorised row asks for graphs off, so its key keeps its meaning."""
    rows = bench_suite.variants(torch.device("cuda"))
    assert rows[:2] == [("sequential", "fp32", False, "auto"), ("vectorized", "bf16", False, "on")]
    assert ("vectorized", "bf16", False, "off") in rows
    assert all(graphs == "auto" for *_, graphs in bench_suite.variants(torch.device("cpu")))
    graphed = [
        {**_row(w, "vectorized", 1000.0), "precision": "bf16", "cuda_graphs_requested": "on"}
        for w in ("resnet18_bn", "vit_tiny")
    ]
    eager = [{**r, "cuda_graphs_requested": "off", "client_steps_per_s": 100.0} for r in graphed]
    hours = projection(graphed + eager)
    assert hours["vectorized/bf16+graphs"] == pytest.approx(2 * 12_000 / 3600, abs=0.01)
    assert hours["vectorized/bf16"] == pytest.approx(2 * 120_000 / 3600, abs=0.01)


def test_a_graphs_row_asks_for_them(monkeypatch, tmp_path: Path) -> None:
    commands = []

    def fake_run(cmd, **kwargs):
        commands.append(cmd)
        raise bench_suite.subprocess.TimeoutExpired(cmd, 1)

    monkeypatch.setattr(bench_suite.subprocess, "run", fake_run)
    config = tmp_path / "c.yaml"
    bench_suite._row(config, "vectorized", "bf16", False, [], [], 1, "on")
    bench_suite._row(config, "sequential", "bf16", False, [], [], 1)
    assert "runtime.cuda_graphs=on" in commands[0]
    assert not any("cuda_graphs" in part for part in commands[1])


def test_the_cuda_suite_fits_the_bench_part_of_gpu_check() -> None:
    """Every row of the CUDA suite at its row limit (both models) fits the time `make gpu-check`
    gives its bench part: no variant is cut by the part's limit, only by its own row limit."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).parents[2] / "benchmarks" / "gpu_check.py"
    spec = importlib.util.spec_from_file_location("gpu_check", path)
    assert spec is not None and spec.loader is not None
    gpu_check = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = gpu_check  # its dataclasses look their module up there
    try:
        spec.loader.exec_module(gpu_check)
    finally:
        del sys.modules["gpu_check"]
    (bench,) = [p for p in gpu_check.parts(Path("results"), None) if p.name == "bench"]
    row_limit = float(bench.command[bench.command.index("--row-timeout") + 1])
    rows = bench_suite.variants(torch.device("cuda"))
    worst = sum(
        2 * (row_limit + (bench_suite.COMPILE_ALLOWANCE_S if compiled else 0.0))
        for _, _, compiled, _ in rows
    )
    assert worst <= bench.limit_s
