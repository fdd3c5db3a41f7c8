"""Checksummed checkpoints: a truncated or corrupted one is detected, set aside with a warning,
and the run restarts from round 0 with the results of an undisturbed run."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from fedbench.engine import loop, train
from fedbench.engine.checkpoint import load_checkpoint, remove_checkpoint, save_checkpoint
from tests.conftest import read_metrics, strip_elapsed
from tests.engine.test_engine import tiny_config
from tests.hostile import KINDS, fifos_unblocked, hostile

CPU = torch.device("cpu")


def saved(tmp_path: Path) -> Path:
    path = tmp_path / "checkpoint.pt"
    save_checkpoint(path, {"round": 3, "x": [torch.arange(256, dtype=torch.float64)]})
    return path


def test_a_checkpoint_round_trips_with_its_checksum(tmp_path: Path):
    path = saved(tmp_path)
    record = json.loads((tmp_path / "checkpoint.json").read_text())
    assert record["round"] == 3 and record["bytes"] == path.stat().st_size
    state = load_checkpoint(path, CPU)
    assert state is not None and torch.equal(state["x"][0], torch.arange(256, dtype=torch.float64))
    remove_checkpoint(path)
    assert list(tmp_path.iterdir()) == []


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _drop_checksum(path: Path) -> None:
    (path.parent / "checkpoint.json").unlink()


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (_truncate, "bytes where"),
        (_flip_a_byte, "SHA-256 does not match"),
        (_drop_checksum, "checksum file checkpoint.json is missing"),
    ],
)
def test_a_damaged_checkpoint_is_set_aside_with_a_warning(tmp_path, caplog, damage, reason):
    path = saved(tmp_path)
    damage(path)
    with caplog.at_level(logging.WARNING, logger="fedbench"):
        assert load_checkpoint(path, CPU) is None
    assert reason in caplog.text and "restarting the run from round 0" in caplog.text
    assert not path.exists() and (tmp_path / "checkpoint.pt.corrupt").is_file()
    assert not (tmp_path / "checkpoint.json").exists()


def test_a_run_with_a_corrupted_checkpoint_restarts_and_matches_an_undisturbed_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    cfg = tiny_config("runtime.checkpoint_every=1", "eval.every=1")
    reference = train(cfg, tmp_path / "ref")

    real_save = loop.save_checkpoint

    def save_then_stop(path, state):  # the process dies right after round 2's checkpoint
        real_save(path, state)
        if state["round"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(loop, "save_checkpoint", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path / "run")
    monkeypatch.undo()
    run_dir = reference.run_dir.parents[1].parent / "run" / "runs" / reference.run_dir.name
    ckpt = run_dir / "checkpoint.pt"
    assert json.loads((run_dir / "checkpoint.json").read_text())["round"] == 2
    # Bit flips in tensor bytes load without error in torch: only the checksum can tell.
    _flip_a_byte(ckpt)

    with caplog.at_level(logging.WARNING, logger="fedbench"):
        resumed = train(cfg, tmp_path / "run")
    assert "is corrupt" in caplog.text
    assert resumed.status == "completed"
    assert strip_elapsed(read_metrics(run_dir)) == strip_elapsed(read_metrics(reference.run_dir))
    assert json.loads((run_dir / "attempt.json").read_text())["attempts"] == 2
    assert not ckpt.exists() and not (run_dir / "checkpoint.json").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_checksum_file_sets_the_checkpoint_aside_and_a_fifo_is_moved_not_deleted(
    tmp_path: Path, caplog, kind: str
):
    path = saved(tmp_path)
    hostile(tmp_path / "checkpoint.json", kind)
    what = {
        "fifo": "is a named pipe (FIFO), not a regular file",
        "deep": "nests lists or objects more than 64 deep",
        "huge": "is 8 GiB, more than the 1 MiB such a file may hold",
    }[kind]
    with fifos_unblocked(tmp_path), caplog.at_level(logging.WARNING, logger="fedbench"):
        assert load_checkpoint(path, CPU) is None
    assert f"its checksum file checkpoint.json is unusable ({what})" in caplog.text
    assert (tmp_path / "checkpoint.pt.corrupt").is_file()
    assert not (tmp_path / "checkpoint.json").exists()
    assert (tmp_path / "checkpoint.json.corrupt").is_fifo() == (kind == "fifo")


def test_a_fifo_in_place_of_the_checkpoint_is_set_aside_unread(tmp_path: Path, caplog):
    path = saved(tmp_path)
    hostile(path, "fifo")
    with fifos_unblocked(tmp_path), caplog.at_level(logging.WARNING, logger="fedbench"):
        assert load_checkpoint(path, CPU) is None
    assert "it is not a regular file" in caplog.text
    assert (tmp_path / "checkpoint.pt.corrupt").is_fifo()
