"""A resumed run says so: "resuming RUN from round N (checkpoint of TIME)" (train and sweeps)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from fedbench.config import load_run_config
from fedbench.engine import train
from fedbench.engine.loop import Engine
from fedbench.engine.run_folder import RunFolder
from fedbench.runner.sweep import make_plan, resume_lines

WHEN = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
RUN = [
    "model.name=logreg",
    "partition.clients=6",
    "fl.participation=0.5",
    "fl.rounds=4",
    "fl.local_steps=2",
    "fl.batch_size=16",
    "eval.every=1",
    "eval.train_subset=200",
    "runtime.checkpoint_every=2",
    "runtime.device=cpu",
]


class Killed(BaseException):
    """Stands for a kill right after the checkpoint of round 2 was written."""


def _kill_after_round_2(monkeypatch: pytest.MonkeyPatch) -> None:
    original = Engine._checkpoint

    def checkpoint(self: Engine, done: int, elapsed: float) -> None:
        original(self, done, elapsed)
        raise Killed

    monkeypatch.setattr(Engine, "_checkpoint", checkpoint)


@pytest.mark.engine
def test_train_prints_the_round_and_the_time_of_the_checkpoint_it_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli
) -> None:
    cfg = load_run_config(None, RUN)
    with monkeypatch.context() as patch:
        _kill_after_round_2(patch)
        with pytest.raises(Killed):
            train(cfg, tmp_path)
    args = [x for item in RUN for x in ("--set", item)]
    code, out, err = run_cli("train", *args, "--out", str(tmp_path))
    assert code == 0, out + err
    assert re.search(rf"resuming {cfg.run_id()} from round 2 \(checkpoint of {WHEN}\)", out), out
    # A fresh run says nothing of the kind.
    code, out, _ = run_cli("train", *args, "--set", "seed=1", "--out", str(tmp_path))
    assert code == 0 and "resuming" not in out


def _fake_checkpoint(out: Path, run_id: str, round_: int, written: str | None) -> None:
    folder = RunFolder(out / "runs" / run_id)
    folder.path.mkdir(parents=True)
    folder.checkpoint.write_bytes(b"state")
    meta = {"sha256": "-", "bytes": 5, "round": round_}
    if written is not None:
        meta["written"] = written
    folder.checkpoint.with_suffix(".json").write_text(json.dumps(meta))
    os.utime(folder.checkpoint, (1_700_000_000, 1_700_000_000))


def test_a_sweep_lists_its_resumed_runs_and_sums_up_past_five(
    tmp_path: Path, tiny_table_path: Path
) -> None:
    plan = make_plan(str(tiny_table_path), seeds=4)
    ids = list(dict.fromkeys(r.run_id for r in plan.runs))
    assert len(ids) == 8
    assert resume_lines(plan, tmp_path) == []
    # Written by an older fedbench (no time in checkpoint.json): the file's time is used.
    _fake_checkpoint(tmp_path, ids[0], 3, None)
    assert resume_lines(plan, tmp_path) == [
        f"resuming {ids[0]} from round 3 (checkpoint of 2023-11-14 22:13:20 UTC)"
    ]
    for i, run_id in enumerate(ids[1:7], start=1):
        _fake_checkpoint(tmp_path, run_id, i, f"2026-01-0{i} 10:00:00 UTC")
    (tmp_path / "runs" / ids[1] / "summary.json").write_text('{"status": "completed"}')
    lines = resume_lines(plan, tmp_path)
    assert len(lines) == 6
    assert lines[1] == f"resuming {ids[2]} from round 2 (checkpoint of 2026-01-02 10:00:00 UTC)"
    assert lines[-1] == "... and 1 more run resuming from checkpoints"


@pytest.mark.engine
def test_run_prints_the_runs_it_resumes(
    tmp_path: Path, tiny_table_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli
) -> None:
    sets = ["runtime.checkpoint_every=1"]
    plan = make_plan(str(tiny_table_path), seeds=1, methods=["FedAdamW"], overrides=sets)
    (run,) = plan.runs
    with monkeypatch.context() as patch:
        _kill_after_round_2(patch)  # the first checkpoint: round 1
        with pytest.raises(Killed):
            train(run.cfg, tmp_path)
    code, out, err = run_cli(
        "run",
        str(tiny_table_path),
        "--seeds",
        "1",
        "--methods",
        "FedAdamW",
        "--set",
        sets[0],
        "--workers",
        "1",
        "--out",
        str(tmp_path),
    )
    assert code == 0, out + err
    assert re.search(rf"resuming {run.run_id} from round 1 \(checkpoint of {WHEN}\)", out), out
