"""A run folder `DIR/runs/<run_id>/` (DESIGN.md, "Outputs"): config.yaml, metrics.jsonl,
summary.json, partition.json, checkpoint.pt while running, model.pt with --save-model."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from fedbench.config import RunConfig

#: Final statuses: a run with one of these is not run again. `stopped`: ended early on request
#: (a STOP file, e.g. a pruned tuning trial) after an evaluation.
FINAL_STATUSES = ("completed", "diverged", "stopped")


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


class RunFolder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.config = path / "config.yaml"
        self.metrics = path / "metrics.jsonl"
        self.summary = path / "summary.json"
        self.partition = path / "partition.json"
        self.checkpoint = path / "checkpoint.pt"
        self.model = path / "model.pt"
        self.stop = path / "STOP"

    @classmethod
    def for_config(cls, out: Path, cfg: RunConfig) -> RunFolder:
        return cls(out / "runs" / cfg.run_id())

    def read_summary(self) -> dict[str, Any] | None:
        if not self.summary.is_file():
            return None
        try:
            return json.loads(self.summary.read_text())
        except json.JSONDecodeError:
            return None

    def is_finished(self) -> bool:
        summary = self.read_summary()
        return summary is not None and summary.get("status") in FINAL_STATUSES

    def create(self, cfg: RunConfig) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        self.config.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))

    def read_metrics(self) -> list[dict[str, Any]]:
        if not self.metrics.is_file():
            return []
        return [json.loads(line) for line in self.metrics.read_text().splitlines() if line.strip()]

    def truncate_metrics(self, lines: int) -> None:
        """Keep the first `lines` rows (those the checkpoint knows about)."""
        kept = self.read_metrics()[:lines]
        self.metrics.write_text("".join(json.dumps(row) + "\n" for row in kept))

    def append_metrics(self, row: dict[str, Any]) -> None:
        with open(self.metrics, "a") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def request_stop(self, reason: str) -> None:
        """Ask the run training in this folder to end after its next evaluation (status
        `stopped`); any process that sees the folder can ask, e.g. a tuner pruning a trial."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.stop.write_text(reason + "\n")

    def stop_requested(self) -> str | None:
        """The reason of a pending stop request, or None."""
        return self.stop.read_text().strip() or "stop requested" if self.stop.is_file() else None

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json_atomic(self.summary, summary)
