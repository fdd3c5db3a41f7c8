"""The engines hand every sampled client's upload to algorithms with `uses_client_uploads`
(FedExP), with the aggregation weights, and keep the streaming mean for the others."""

import json
from pathlib import Path

import pytest
import torch

from fedbench.algorithms.fedexp import FedExP
from fedbench.config import load_run_config
from fedbench.engine.run import train
from fedbench.engine.schedule import client_schedule

TINY = [
    "algorithm.name=fedexp",
    "model.name=logreg",
    "partition.clients=4",
    "fl.participation=0.5",
    "fl.rounds=2",
    "fl.local_steps=2",
    "fl.batch_size=16",
    "eval.every=2",
    "eval.train_subset=100",
    "runtime.checkpoint_every=0",
]


@pytest.mark.parametrize(
    ("engine", "weighting"), [("sequential", "samples"), ("vectorized", "uniform")]
)
def test_server_step_sees_every_sampled_upload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str, weighting: str
) -> None:
    seen = []
    original = FedExP.server_update_with_uploads

    def record(self, x, mean, uploads, server, info) -> None:
        seen.append((info.round, [u.client for u in uploads], [u.weight for u in uploads]))
        total = sum(u.weight for u in uploads)
        for j, m in enumerate(mean["delta"]):
            weighted = sum(u.weight * u.tensors["delta"][j] for u in uploads) / total
            torch.testing.assert_close(weighted, m, rtol=1e-5, atol=1e-7)
        original(self, x, mean, uploads, server, info)

    monkeypatch.setattr(FedExP, "server_update_with_uploads", record)
    cfg = load_run_config(
        None, [*TINY, f"runtime.engine={engine}", f"algorithm.weighting={weighting}"]
    )
    result = train(cfg, tmp_path)
    assert result.status == "completed"
    schedule = client_schedule(cfg.seed, 2, 4, 2)
    assert [(r, clients) for r, clients, _ in seen] == [(0, schedule[0]), (1, schedule[1])]
    sizes = [c["n"] for c in json.loads((result.run_dir / "partition.json").read_text())["clients"]]
    for _, clients, weights in seen:
        expected = [float(sizes[c]) if weighting == "samples" else 1.0 for c in clients]
        assert weights == expected
