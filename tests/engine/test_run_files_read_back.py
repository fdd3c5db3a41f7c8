"""Run files read back through fedbench.readback: a bad one is set aside and the run trained again;
model.pt is written before the summary; a finished run is cleaned of what a kill left."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from fedbench.engine import train
from fedbench.engine.run_folder import RunFolder, run_status
from fedbench.errors import FedbenchError
from tests.conftest import read_metrics, strip_elapsed
from tests.engine.test_engine import tiny_config
from tests.hostile import KINDS, fifos_unblocked, hostile


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, list[dict]]:
    out = tmp_path_factory.mktemp("finished")
    result = train(tiny_config(), out, save_model=True)
    return result.run_dir, strip_elapsed(read_metrics(result.run_dir))


def _copy(run: Path, tmp_path: Path) -> Path:
    import shutil

    shutil.copytree(run.parent.parent, tmp_path / "out")
    return tmp_path / "out" / "runs" / run.name


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("summary.json", b"[1, 2]"),
        ("summary.json", b'{"status": "completed", "final": "oops"}'),
        ("summary.json", b'{"status": "\xff"}'),
        ("attempt.json", b'{"attempts": "x"}'),
    ],
)
def test_a_bad_run_file_is_set_aside_and_the_run_trained_again(
    tmp_path: Path, finished, caplog, name: str, content: bytes
):
    run = _copy(finished[0], tmp_path)
    (run / name).write_bytes(content)
    assert run_status(run).state in ("interrupted", "completed")  # read, never a traceback
    with caplog.at_level(logging.WARNING, logger="fedbench"):
        result = train(tiny_config(), tmp_path / "out")
    if name == "summary.json":
        assert result.status == "completed"
        assert f"{run / name}: " in caplog.text and f"moved it to {name}.corrupt" in caplog.text
        assert (run / f"{name}.corrupt").read_bytes() == content
        assert strip_elapsed(read_metrics(run)) == finished[1]
    else:  # the run is finished: attempt.json is only read by status readers
        assert result.status == "skipped"
    assert RunFolder(run).read_summary()["status"] == "completed"


def test_model_pt_asked_of_a_finished_run_without_one_is_one_line(tmp_path: Path, finished):
    run = _copy(finished[0], tmp_path)
    (run / "model.pt").write_bytes(b"half a model")
    with pytest.raises(FedbenchError, match=r"its model.pt is unreadable .* remove "):
        train(tiny_config(), tmp_path / "out", save_model=True)
    assert train(tiny_config(), tmp_path / "out").status == "skipped"  # not asked: fine


def test_model_pt_is_written_before_the_summary(tmp_path: Path, monkeypatch):
    from fedbench.engine import loop

    order: list[str] = []
    real_write, real_summary = loop.write_file, RunFolder.write_summary

    def write_file(path, content):
        order.append(Path(path).name)
        real_write(path, content)

    def write_summary(self, summary):
        order.append("summary.json")
        real_summary(self, summary)

    monkeypatch.setattr(loop, "write_file", write_file)
    monkeypatch.setattr(RunFolder, "write_summary", write_summary)
    result = train(tiny_config(), tmp_path, save_model=True)
    assert order[-2:] == ["model.pt", "summary.json"]
    state = torch.load(result.run_dir / "model.pt", weights_only=True)
    assert set(state) == {"1.weight", "1.bias"}  # logreg: flatten, then one linear layer


def test_a_finished_run_loses_the_checkpoint_a_kill_left(tmp_path: Path, finished):
    run = _copy(finished[0], tmp_path)
    (run / "checkpoint.pt").write_bytes(b"left by a kill between summary and cleanup")
    (run / ".summary.json.4194999.deadbeef.tmp").write_text("{")
    assert train(tiny_config(), tmp_path / "out").status == "skipped"
    assert not (run / "checkpoint.pt").exists()
    assert not list(run.glob("*.tmp"))


def test_metrics_jsonl_a_folder_is_set_aside_and_the_run_restarts(tmp_path: Path, finished):
    run = _copy(finished[0], tmp_path)
    (run / "summary.json").unlink()
    (run / "metrics.jsonl").unlink()
    (run / "metrics.jsonl").mkdir()
    result = train(tiny_config(), tmp_path / "out")
    assert result.status == "completed" and (run / "metrics.jsonl.corrupt").is_dir()
    assert strip_elapsed(read_metrics(run)) == finished[1]


def test_a_finished_run_with_a_bad_metrics_row_is_trained_again(tmp_path: Path, finished, caplog):
    run = _copy(finished[0], tmp_path)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    lines[1] = '{"round": 2, "test_acc": "abc"}'
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert not RunFolder(run).is_finished()
    with caplog.at_level(logging.WARNING, logger="fedbench"):
        result = train(tiny_config(), tmp_path / "out")
    assert result.status == "completed" and "line 2: test_acc is 'abc'" in caplog.text
    assert strip_elapsed(read_metrics(run)) == finished[1]
    assert (run / "metrics.jsonl.corrupt").is_file()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["summary.json", "metrics.jsonl", "attempt.json"])
def test_a_fifo_a_deep_or_a_huge_run_file_is_set_aside_and_the_run_trained_again(
    tmp_path: Path, finished, caplog, name: str, kind: str
):
    """A FIFO blocked the reader forever, JSON nested 100,000 deep was a RecursionError, an 8 GiB
    file was read whole: each is refused before it is parsed, moved aside, and the run retrained."""
    run = _copy(finished[0], tmp_path)
    if name == "attempt.json":
        (run / "summary.json").unlink()  # an unfinished run: its attempt.json is read to resume
    hostile(run / name, kind)
    with fifos_unblocked(run), caplog.at_level(logging.WARNING, logger="fedbench"):
        assert run_status(run).state in ("interrupted", "completed")
        result = train(tiny_config(), tmp_path / "out")
    what = {
        "fifo": "is a named pipe (FIFO), not a regular file",
        "deep": "nests lists or objects more than 64 deep",
        "huge": "is 8 GiB, more than the ",
    }[kind]
    warning = next(
        r.getMessage() for r in caplog.records if f"moved it to {name}" in r.getMessage()
    )
    assert what in warning and f"{run / name}: " in warning and "\n" not in warning
    assert result.status == "completed"
    assert strip_elapsed(read_metrics(run)) == finished[1]
    aside = run / f"{name}.corrupt"  # moved, not deleted
    assert {"fifo": aside.is_fifo, "deep": aside.is_file, "huge": aside.is_file}[kind]()
