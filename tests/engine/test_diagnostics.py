"""Diagnostics (FedAdamW Figure 2): client_drift and v_spread in metrics.jsonl."""

import json
from pathlib import Path

import pytest
import torch

from fedbench.config import load_run_config
from fedbench.engine.aggregation import Aggregator
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
