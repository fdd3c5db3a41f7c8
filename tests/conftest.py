"""Shared test helpers: invoking the CLI in-process and reading run folders."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fedbench.cli import main


@pytest.fixture
def run_cli(monkeypatch, capsys):
    """Run `fedbench ARGS...` in-process; returns (exit_code, stdout, stderr)."""

    def invoke(*args: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["fedbench", *args])
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err

    return invoke


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def strip_elapsed(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "elapsed_s"} for row in rows]


#: A run of a few seconds on the embedded digits data.
TINY = [
    "--set",
    "model.name=logreg",
    "--set",
    "partition.clients=6",
    "--set",
    "fl.rounds=4",
    "--set",
    "fl.participation=0.5",
    "--set",
    "fl.local_steps=3",
    "--set",
    "fl.batch_size=16",
    "--set",
    "eval.every=2",
]
