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


def test_the_first_non_finite_round_is_named_although_read_at_the_evaluation(
    tmp_path: Path,
) -> None:
    """Finiteness is recorded on the device and read at evaluations (no sync per round): a run
    evaluated every 4 rounds that blows up in round 1 (lr 1e30: inf at the first step) still
    reports round 1 (read before the round-2 checkpoint would be written), with no metrics row
    after round 0."""
    cfg = load_run_config(
        None,
        [
            "algorithm.name=fedavg",
            "algorithm.lr=1.0e30",
            "algorithm.grad_clip=null",
            "model.name=logreg",
            "partition.clients=4",
            "fl.rounds=8",
            "fl.local_steps=5",
            "eval.every=4",
            "runtime.checkpoint_every=2",
        ],
    )
    result = train(cfg, tmp_path)
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["status"] == "diverged" and summary["diverged_round"] == 1
    assert "round 1" in summary["error"]
    rows = [
        json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    assert [row["round"] for row in rows] == [0]
