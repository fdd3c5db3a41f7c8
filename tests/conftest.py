"""Shared fixtures: a tiny table (logreg on digits, 2 rows x 1 column x 2 seeds, a few rounds)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml


def tiny_table_data() -> dict[str, Any]:
    return {
        "table": "tiny",
        "title": "tiny test table",
        "paper": {"table": "fedadamw_table1", "rows": {"Local SGD": "FedAvg"}},
        "base": {
            "data": {"name": "digits", "augment": False},
            "partition": {"kind": "dirichlet", "alpha": 0.6, "clients": 5},
            "model": {"name": "logreg"},
            "fl": {"rounds": 3, "participation": 0.4, "local_steps": 2, "batch_size": 16},
            "algorithm": {"name": "fedadamw", "lr": 1.0e-2, "grad_clip": 10.0},
            "eval": {"every": 1, "train_subset": 200},
            "runtime": {"checkpoint_every": 0, "device": "cpu"},
        },
        "grid": {"partition.alpha": [0.6]},
        "methods": {
            "Local SGD": {"algorithm": {"name": "fedavg", "lr": 0.1, "weight_decay": 1.0e-3}},
            "FedAdamW": {"algorithm": {"name": "fedadamw", "alpha": 0.5}},
        },
        "seeds": [0, 1],
        "metrics": ["test_acc", "train_loss", "comm"],
        "presets": {"quick": {"fl.rounds": 2}},
    }


@pytest.fixture
def tiny_table_path(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_table_data(), sort_keys=False))
    return path
