"""Diagnostics (FedAdamW Figure 2): client_drift and v_spread in metrics.jsonl."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fedbench.config import load_run_config
from fedbench.engine.aggregation import Aggregator
from fedbench.engine.plan import execution_plan
from fedbench.engine.run import train

TINY = [
    "model.name=logreg",
    "partition.clients=4",
    "fl.participation=1.0",
    "fl.rounds=2",
    "fl.local_steps=2",
    "fl.batch_size=16",
    "eval.every=1",
    "eval.train_subset=100",
    "eval.diagnostics=true",
]


def test_aggregator_spread_is_mean_squared_distance_to_mean() -> None:
    gen = torch.Generator().manual_seed(0)
    uploads = [[torch.randn(3, 2, generator=gen), torch.randn(4, generator=gen)] for _ in range(5)]
    weights = [1.0, 2.0, 0.5, 1.0, 3.0]
    agg = Aggregator(spread_of="delta")
    for upload, w in zip(uploads, weights, strict=True):
        agg.add({"delta": upload}, w)
    mean = agg.means()["delta"]
    flat = torch.stack([torch.cat([t.reshape(-1) for t in u]) for u in uploads]).double()
    w = torch.tensor(weights, dtype=torch.float64)
    center = (w[:, None] * flat).sum(0) / w.sum()
    expected = float((w * ((flat - center) ** 2).sum(1)).sum() / w.sum())
    assert agg.spread(mean) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize(("name", "keeps_v"), [("local_adam", True), ("fedavg", False)])
def test_metrics_rows_carry_diagnostics(tmp_path: Path, name: str, keeps_v: bool) -> None:
    cfg = load_run_config(None, [*TINY, f"algorithm.name={name}"])
    result = train(cfg, tmp_path)
    assert result.status == "completed"
    rows = [json.loads(x) for x in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rows] == [0, 1, 2]
    assert rows[0]["client_drift"] is None
    for row in rows[1:]:
        assert row["client_drift"] > 0
        assert (row["v_spread"] is not None and row["v_spread"] >= 0) == keeps_v


def _one_round(algorithm: list[str], tmp_path: Path):
    """One client, one round, eval every round, in float64: (engine, x before, x after)."""
    from fedbench.engine.loop import Engine
    from fedbench.engine.run_folder import RunFolder
    from fedbench.engine.setup import prepare_run

    cfg = load_run_config(
        None,
        [
            *TINY,
            "fl.participation=0.25",  # one of the 4 clients
            "fl.local_steps=3",
            "algorithm.grad_clip=null",
            "algorithm.weight_decay=0",
            "algorithm.lr_schedule=constant",
            *algorithm,
        ],
    )
    setup = prepare_run(cfg)
    setup.model.double()
    d = setup.data
    setup.data = replace(d, x_train=d.x_train.double(), x_test=d.x_test.double())
    engine = Engine(execution_plan(setup), setup, RunFolder(tmp_path), None)
    before = [t.clone() for t in engine.x]
    engine._round(0, cfg.algorithm.lr, diagnostics=True)
    return engine, before


def test_local_step_ratio_is_the_rms_step_over_lr_by_hand(tmp_path: Path) -> None:
    """FedAvg, one client, K = 3: y_k - y_{k-1} = -lr * g_k, so the ratio is the mean of
    RMS(g_k); with K = 1 it is exactly RMS(x_new - x_old) / lr (server_lr 1)."""
    engine, before = _one_round(
        ["algorithm.name=fedavg", "algorithm.lr=0.05", "fl.local_steps=1"], tmp_path
    )
    step = torch.cat([(a - b).flatten() for a, b in zip(engine.x, before, strict=True)])
    assert step.dtype == torch.float64
    expected = float(step.square().mean().sqrt()) / 0.05
    assert engine.diagnostics["local_step_ratio"] == pytest.approx(expected, rel=1e-12)


def test_local_step_ratio_of_adam_first_step_is_about_one(tmp_path: Path) -> None:
    """Local AdamW's first step is m_hat / (sqrt(v_hat) + eps) = g / (|g| + eps): RMS ~ 1, and
    K = 1 makes the round's ratio exactly that step's."""
    engine, before = _one_round(
        ["algorithm.name=local_adamw", "algorithm.lr=0.01", "fl.local_steps=1"], tmp_path
    )
    step = torch.cat([(a - b).flatten() for a, b in zip(engine.x, before, strict=True)])
    ratio = engine.diagnostics["local_step_ratio"]
    assert ratio == pytest.approx(float(step.square().mean().sqrt()) / 0.01, rel=1e-12)
    assert 0.9 < ratio <= 1.0


def test_relative_drift_is_the_drift_over_the_squared_mean_update_by_hand() -> None:
    """relative_drift = mean_i ||Delta_i - Delta_bar||^2 / ||Delta_bar||^2: invariant to the
    step scale (the figures compare methods at different learning rates with it)."""
    from fedbench.engine.aggregation import Aggregator, round_diagnostics

    deltas = [
        torch.tensor([1.0, 2.0], dtype=torch.float64),
        torch.tensor([3.0, 0.0], dtype=torch.float64),
    ]
    for scale in (1.0, 1e-3):
        agg = Aggregator(spread_of="delta")
        for d in deltas:
            agg.add({"delta": [scale * d]}, 1.0)
        found = round_diagnostics(agg, agg.means(), [])
        # Delta_bar = (2, 1): drift = mean(||(-1, 1)||^2, ||(1, -1)||^2) = 2; ||Delta_bar||^2 = 5
        assert found["client_drift"] == pytest.approx(2.0 * scale**2, rel=1e-12)
        assert found["relative_drift"] == pytest.approx(0.4, rel=1e-10)
