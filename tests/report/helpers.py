"""Fake run folders for report tests: config.yaml, metrics.jsonl and summary.json as the engine
writes them, with chosen final accuracies (no training)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml


def fake_run(folder: Path, cfg, final_acc: float, status: str = "completed") -> None:
    folder.mkdir(parents=True)
    folder.joinpath("config.yaml").write_text(yaml.safe_dump(cfg.to_dict()))
    rows = [
        {
            "round": r,
            "test_acc": final_acc - 10 * (2 - r),
            "train_loss": 1.0 / (r + 1),
            "test_loss": 1.0,
            "comm_up": 0,
            "comm_down": 0,
            "elapsed_s": r,
        }
        for r in range(3)
    ]
    folder.joinpath("metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {
        "status": status,
        "error": None if status == "completed" else "RuntimeError: x",
        "d": 650,
        "comm_up": 650,
        "final": rows[-1],
        "wall_s": 1.0,
    }
    folder.joinpath("summary.json").write_text(json.dumps(summary))
