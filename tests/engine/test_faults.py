"""Faults of a dying process or a full disk: a torn metrics.jsonl line, malformed or foreign
checkpoints, ENOSPC mid-write. Each leaves a run that resumes to an undisturbed run's result."""

from __future__ import annotations

import errno
import hashlib
import json
import logging
from pathlib import Path

import pytest
import torch

from fedbench import files
from fedbench.engine import checkpoint, loop, train
from fedbench.engine.run_folder import RunFolder
from fedbench.metrics_log import read_rows, truncate
from fedbench.os_errors import disk_error_line
from tests.conftest import TINY, read_metrics, strip_elapsed
from tests.engine.test_engine import tiny_config

ROWS = [{"round": 0, "test_acc": 0.1}, {"round": 1, "test_acc": 0.25}]


def _log(path: Path, tail: bytes) -> Path:
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in ROWS) + tail)
    return path


@pytest.mark.parametrize(
    "tail",
    [b'{"round": 2, "test_a', b'{"round": 2}', b"\x00\xff\xfe", b"[1, 2]\n", b"not json\n{}\n"],
)
def test_a_torn_or_garbage_tail_is_not_a_row_and_truncate_cuts_it_off(tmp_path: Path, tail):
    path = _log(tmp_path / "metrics.jsonl", tail)
    assert read_rows(path) == ROWS
    assert truncate(path, 5) == 2  # asked for more rows than there are: keeps the valid ones
    assert path.read_bytes() == b"".join(json.dumps(r).encode() + b"\n" for r in ROWS)
    assert truncate(path, 1) == 1 and read_rows(path) == ROWS[:1]
    assert read_rows(tmp_path / "absent.jsonl") == []


def _killed_after_round_2(cfg, out: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The run folder of `cfg` whose process died right after its round-2 checkpoint."""
    real_save = loop.save_checkpoint

    def save_then_stop(path, state):
        real_save(path, state)
        if state["round"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(loop, "save_checkpoint", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, out)
    monkeypatch.undo()
    return RunFolder.for_config(out, cfg).path


def _rewrite(run: Path, change) -> None:
    """Change the saved state and write it back with a matching checksum."""
    path = run / "checkpoint.pt"
    torch.save(change(torch.load(path, weights_only=True)), path)
    data = path.read_bytes()
    record = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "round": 2}
    (run / "checkpoint.json").write_text(json.dumps(record))


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    cfg = tiny_config("runtime.checkpoint_every=1", "eval.every=1")
    return cfg, train(cfg, tmp_path_factory.mktemp("ref")).run_dir


def _foreign(run: Path, tmp_path: Path, monkeypatch) -> None:
    other = tiny_config("runtime.checkpoint_every=1", "eval.every=1", "seed=1")
    other_run = _killed_after_round_2(other, tmp_path / "other", monkeypatch)
    for name in ("checkpoint.pt", "checkpoint.json"):
        (run / name).write_bytes((other_run / name).read_bytes())


DAMAGES = {
    "checksum file holding a list": (
        lambda run, *_: (run / "checkpoint.json").write_text("[1, 2]"),
        "holds a list where a Checksum mapping belongs",
    ),
    "checksummed dict without x": (
        lambda run, *_: _rewrite(run, lambda s: {k: v for k, v in s.items() if k != "x"}),
        "it lacks x",
    ),
    "x of another model": (
        lambda run, *_: _rewrite(run, lambda s: {**s, "x": [torch.zeros(3) for _ in s["x"]]}),
        "its x[0] is (3,)",
    ),
    "a list instead of a state": (
        lambda run, *_: _rewrite(run, lambda s: list(s["x"])),
        "it holds a list",
    ),
    "the checkpoint of another run": (_foreign, "it belongs to run fedadamw"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_malformed_or_foreign_checkpoint_is_set_aside_and_the_run_restarts(
    tmp_path: Path, monkeypatch, caplog, reference, damage: str
):
    cfg, ref_dir = reference
    run = _killed_after_round_2(cfg, tmp_path / "run", monkeypatch)
    make, reason = DAMAGES[damage]
    make(run, tmp_path, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="fedbench"):
        resumed = train(cfg, tmp_path / "run")
    assert reason in caplog.text and "restarting the run from round 0" in caplog.text
    assert resumed.status == "completed"
    assert (run / "checkpoint.pt.corrupt").is_file()  # set aside, not deleted
    assert strip_elapsed(read_metrics(run)) == strip_elapsed(read_metrics(ref_dir))


def test_a_torn_metrics_line_is_cut_on_resume(tmp_path: Path, monkeypatch, caplog, reference):
    cfg, ref_dir = reference
    run = _killed_after_round_2(cfg, tmp_path / "run", monkeypatch)
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write('{"round": 3, "test_acc": 0.')  # the process died mid-write
    with caplog.at_level(logging.WARNING, logger="fedbench"):
        resumed = train(cfg, tmp_path / "run")
    assert "corrupt" not in caplog.text  # the checkpoint is fine: a resume, not a restart
    assert resumed.status == "completed"
    assert json.loads((run / "attempt.json").read_text())["attempts"] == 2
    assert strip_elapsed(read_metrics(run)) == strip_elapsed(read_metrics(ref_dir))


def test_a_full_disk_at_a_checkpoint_is_one_line_leaves_no_temp_file_and_the_run_resumes(
    tmp_path: Path, monkeypatch, reference, run_cli
):
    cfg, ref_dir = reference
    real_save = torch.save

    def full_disk(state, fh):  # part of the file is written, then the disk is full
        if state["round"] != 3:
            return real_save(state, fh)
        fh.write(b"\x00" * 1000)
        raise OSError(errno.ENOSPC, "No space left on device", str(fh.fh.name))

    monkeypatch.setattr(checkpoint.torch, "save", full_disk)
    sets = [f"--set={s}" for s in ("runtime.checkpoint_every=1", "eval.every=1")]
    code, _, err = run_cli("train", *TINY, *sets, "--out", str(tmp_path))
    assert code == 2 and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("error: No space left on device (ENOSPC)")
    assert "checkpoint.pt; free disk space and rerun the same command" in err
    monkeypatch.undo()
    run = RunFolder.for_config(tmp_path, cfg).path
    assert not list(tmp_path.rglob("*.tmp"))
    assert json.loads((run / "summary.json").read_text())["status"] == "failed"
    assert train(cfg, tmp_path).status == "completed"  # space freed: the rerun resumes
    assert json.loads((run / "attempt.json").read_text())["attempts"] == 2
    assert strip_elapsed(read_metrics(run)) == strip_elapsed(read_metrics(ref_dir))


def test_only_disk_faults_become_one_line():
    line = disk_error_line(OSError(errno.EROFS, "Read-only file system", "/o/runs"))
    assert line == (
        "Read-only file system (EROFS): /o/runs; the file system is read-only; "
        "give a writable folder with --out"
    )
    assert disk_error_line(OSError(errno.ENOENT, "No such file", "x")) is None  # a bug: traceback


def test_a_disk_that_fills_up_inside_torch_save_raises_the_os_error(tmp_path: Path, monkeypatch):
    """torch's zip writer turns a failed write into `RuntimeError: unexpected pos`; the checkpoint
    raises the disk's OSError instead (one line in the CLI) and removes its temp file."""

    class FillingUp:
        def __init__(self, fh, free: int) -> None:
            self.fh, self.free = fh, free

        def write(self, data: bytes) -> int:
            if len(data) > self.free:
                raise OSError(errno.ENOSPC, "No space left on device", "checkpoint.pt.tmp")
            self.free -= len(data)
            return self.fh.write(data)

        def __getattr__(self, name: str):
            return getattr(self.fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self.fh.close()

    def filling_up(path, mode):
        return FillingUp(open(path, mode), 3000)  # FillingUp closes it

    # The one writer (fedbench.files.write_file) opens the temporary that torch.save fills.
    monkeypatch.setattr(files, "open", filling_up, raising=False)
    state = {"round": 1, "x": [torch.arange(4096, dtype=torch.float64)]}
    with pytest.raises(OSError) as caught:
        checkpoint.save_checkpoint(tmp_path / "checkpoint.pt", state)
    assert caught.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_a_run_interrupted_under_its_former_id_resumes_from_its_checkpoint(
    tmp_path: Path, monkeypatch, caplog
):
    """A shards run whose id (and config hash) still named the unused partition.alpha, killed
    mid-run by an older fedbench: the next run finds it under its current id and resumes it."""
    from fedbench.config import RunConfig

    cfg = tiny_config(
        "runtime.checkpoint_every=1", "eval.every=1", "partition.kind=shards", "partition.alpha=0.1"
    )
    assert cfg.run_id(legacy=True) != cfg.run_id()
    run_id, config_hash = RunConfig.run_id, RunConfig.config_hash
    monkeypatch.setattr(RunConfig, "run_id", lambda self, legacy=False: run_id(self, legacy=True))
    monkeypatch.setattr(
        RunConfig, "config_hash", lambda self, legacy=False: config_hash(self, legacy=True)
    )
    # Killed under the former id; the folder is looked up again with the patches undone.
    run = _killed_after_round_2(cfg, tmp_path, monkeypatch)
    assert run.name == cfg.run_id() and (run / "checkpoint.pt").is_file()
    assert (tmp_path / "runs" / cfg.run_id(legacy=True)).is_symlink()
    with caplog.at_level(logging.WARNING, logger="fedbench"):
        resumed = train(cfg, tmp_path)
    assert "corrupt" not in caplog.text and resumed.status == "completed"
    assert resumed.run_dir == run
    assert json.loads((run / "attempt.json").read_text())["attempts"] == 2
