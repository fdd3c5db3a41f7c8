"""A huge learning rate ends the run with status `diverged`, not a crash."""

import json
from pathlib import Path

from fedbench.config import load_run_config
from fedbench.engine.run import train


def test_huge_lr_is_reported_as_diverged(tmp_path: Path) -> None:
    cfg = load_run_config(
        None,
        [
            "algorithm.name=fedavg",
            "algorithm.lr=1.0e12",
            "algorithm.grad_clip=null",
            "model.name=logreg",
            "partition.clients=4",
            "fl.rounds=5",
            "fl.local_steps=5",
            "eval.every=1",
            "eval.train_subset=100",
        ],
    )
    result = train(cfg, tmp_path)
    assert result.status == "diverged"
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["status"] == "diverged"
    assert summary["diverged_round"] is not None
