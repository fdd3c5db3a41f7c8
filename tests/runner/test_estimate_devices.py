"""`--dry-run` gives hours on every device fedbench ships measurements of (the H200 of `make
gpu-check` first), private runs from the measured private / non-private ratio; `--estimate`'s
probe keeps to its time budget and scales a round that does not fit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fedbench.runner import measured, probe
from fedbench.runner.estimate import estimate_lines
from fedbench.runner.sweep import make_plan

H200 = "estimate on NVIDIA H200 (measured 2026-11-26 23:58 UTC, load average 0.82)"
#: The newest H200 file (make gpu-check of 2026-11-26 23:57): both Table 1 models measured.
NEWEST = "nvidia-h200-2026-11-26-2357.json"


def _rate(workload: str, engine: str, precision: str, compiled: bool = False) -> float:
    data = json.loads((measured.SHIPPED_DIR / NEWEST).read_text())
    (row,) = [
        r
        for r in data["rows"]
        if (r["workload"], r["engine_requested"], r["precision"], bool(r["compile"]))
        == (workload, engine, precision, compiled)
    ]
    return float(row["client_steps_per_s"])


def _lines(monkeypatch, tmp_path: Path, table: str, *sets: str) -> list[str]:
    monkeypatch.chdir(tmp_path)  # no benchmarks/results here: the shipped files only
    plan = make_plan(table, overrides=["runtime.device=cpu", *sets])
    return estimate_lines(plan, None)


def test_the_shipped_h200_figures_are_the_gpu_checks():
    data = json.loads((measured.SHIPPED_DIR / "nvidia-h200.json").read_text())
    rows = {(r["engine"], r["precision"]): r["client_steps_per_s"] for r in data["rows"]}
    assert rows == {
        ("sequential", "fp32"): 106.05,
        ("sequential", "tf32"): 254.64,
        ("sequential", "bf16"): 298.05,
        ("vectorized", "fp32"): 66.00,
        ("vectorized", "tf32"): 162.48,
    }
    assert data["measured_at"] == "2026-11-26 04:57 UTC" and data["device"] == "NVIDIA H200"
    assert {(r["batch_size"], r["local_steps"], r["clients_per_round"]) for r in data["rows"]} == {
        (50, 10, 10)
    }


def test_the_dry_run_gives_table1_hours_on_the_h200(monkeypatch, tmp_path: Path):
    lines = _lines(monkeypatch, tmp_path, "table1")
    line = next(x for x in lines if x.startswith(H200))
    # 80 ResNet-18 and 80 ViT-Tiny runs x 300 rounds x 10 clients x 50 steps = 12M client steps
    # each, at the newest file's sequential fp32 rates (104.01 and 171.60 client steps/s).
    resnet, vit = (
        _rate("resnet18_bn", "sequential", "fp32"),
        _rate("vit_tiny", "sequential", "fp32"),
    )
    assert abs(resnet - 104.01) < 0.01 and abs(vit - 171.60) < 0.01
    hours = 12_000_000 / resnet / 3600 + 12_000_000 / vit / 3600
    assert f": {hours:,.1f} h of training for 160 of 160 runs to train (24,000,000 client" in line
    assert "resnet18_bn sequential fp32: 104 client steps/s" in line
    at = lines.index(line)
    assert NEWEST in lines[at + 1] and "measured: 2026-11-26 23:58 UTC" in lines[at + 1]
    # bf16 on the H200: the bf16 rows (with CUDA graphs).
    lines = _lines(monkeypatch, tmp_path, "table1", "runtime.precision=bf16")
    line = next(x for x in lines if x.startswith(H200))
    bf16 = 12_000_000 / _rate("resnet18_bn", "sequential", "bf16") / 3600
    bf16 += 12_000_000 / _rate("vit_tiny", "sequential", "bf16") / 3600
    assert f": {bf16:,.1f} h of training for 160 of 160" in line


def test_private_runs_are_estimated_from_the_measured_ratio(monkeypatch, tmp_path: Path):
    lines = _lines(monkeypatch, tmp_path, "dp_table2", "fl.rounds=10")
    line = next(x for x in lines if x.startswith(H200))
    # The H200's ratio for ResNet-18 GN at B 50: ghost (its bk was not measured), 5.83x.
    ratio = 5.8323956225384075
    rate = _rate("resnet18_bn", "sequential", "fp32") / ratio
    runs = 6 * 2 * 2 * 5
    seconds = runs * 10 * 10 * 50 / rate
    assert f"not included); private runs {seconds / 3600:.1f} h ({runs} runs) at " in line
    assert (
        f"resnet18_bn (for norm gn) sequential fp32 private / {ratio:.3g} (ghost, resnet18 gn "
        f"3x32x32 B50 on NVIDIA H200): {rate:.3g} client steps/s"
    ) in line


def test_a_newer_measurement_copied_in_replaces_the_older(monkeypatch, tmp_path: Path):
    shipped = tmp_path / "shipped"
    shutil.copytree(measured.SHIPPED_DIR, shipped)
    newer = json.loads((shipped / "nvidia-h200.json").read_text())
    newer["measured_at"] = "2027-01-02 03:04 UTC"
    newer["load_average"] = 0.5
    for row in newer["rows"]:
        row["client_steps_per_s"] *= 2
    (shipped / "any-name.json").write_text(json.dumps(newer))
    monkeypatch.setattr(measured, "SHIPPED_DIR", shipped)
    lines = _lines(monkeypatch, tmp_path, "table1")
    heads = [x for x in lines if x.startswith("estimate on NVIDIA H200")]
    assert len(heads) == 1
    assert heads[0].startswith(
        "estimate on NVIDIA H200 (measured 2027-01-02 03:04 UTC, load average 0.5): "
        f"{80 * 300 * 10 * 50 / 212.1 / 3600:,.1f} h"
    )


class _FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _fake_trainer(clock: _FakeClock, per_step: float, first: float):
    class Trainer:
        def __init__(self, cfg, tmp: Path) -> None:
            self.cfg, self.setup_s, self.rounds = cfg, 0.5, 0
            clock.now += self.setup_s

        def round(self) -> float:
            c, k = probe.round_shape(self.cfg)
            spent = (first if self.rounds == 0 else 0.0) + per_step * c * k
            self.rounds += 1
            clock.now += spent
            return spent

        def evaluation(self, real) -> float:
            clock.now += 1.0
            return 1.0

        def close(self) -> None:
            pass

    return Trainer


@pytest.mark.parametrize(
    ("per_step", "share", "shape", "rounds", "step_s", "spent"),
    [
        # A small model: the evaluation, then the run's own round (5 clients x 10 steps) as often
        # as the share (counted after the first set-up) allows.
        (0.01, 20.0, (5, 10), 13, 0.01, 20.02),
        # A paper-size model on a CPU, 60 s a step (first call 65 s), more than the share: the
        # warm-up step alone stands for a step (an over-estimate), no evaluation.
        (60.0, 20.0, (1, 1), 0, 65.0, 65.5),
        # 1 s a step: the run's round scaled down to 1 client x 10 steps, one timed round.
        (1.0, 30.0, (1, 10), 1, 1.0, 35.0),
    ],
)
def test_the_probe_keeps_to_its_share_and_scales_a_round_that_does_not_fit(
    monkeypatch, tmp_path: Path, per_step, share, shape, rounds, step_s, spent
):
    clock = _FakeClock()
    monkeypatch.setattr(probe.time, "perf_counter", clock)
    monkeypatch.setattr(probe, "_Trainer", _fake_trainer(clock, per_step, first=5.0))
    plan = make_plan(
        "table1",
        preset="quick",
        overrides=["fl.participation=0.25", "fl.local_steps=10", "runtime.device=cpu"],
    )
    got = probe.measure(plan.runs[0].cfg, "w", share, tmp_path)
    assert (got.shape, got.rounds) == (shape, rounds)
    assert got.step_s == pytest.approx(step_s)
    assert got.scaled is (shape != (5, 10))
    assert clock.now == pytest.approx(spent)


def test_a_results_file_of_another_benchmark_is_no_suite(tmp_path: Path):
    """benchmarks/shared_machine.py writes rows of client steps/s too, without a suite or a
    device: the dry run read it as a measurement of a device named '?'."""
    path = tmp_path / "shared-machine.json"
    path.write_text(json.dumps({"measured_at": "x", "rows": [{"client_steps_per_s": 5.0}]}))
    assert measured.load_figures(path) is None
    suite = tmp_path / "suite.json"
    suite.write_text(
        json.dumps({"suite": "table1", "device": "D", "rows": [{"client_steps_per_s": 5.0}]})
    )
    assert measured.load_figures(suite) is not None
