"""Run folders shared between processes: safe names, the per-run lock, attempts, run_status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fedbench.engine.run_folder import (
    RunBusyError,
    RunFolder,
    child_folder,
    run_status,
    safe_name,
    write_json_atomic,
)
from fedbench.errors import FedbenchError
from fedbench.files import MAX_NAME


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("../x", "x-"),
        ("../../etc/passwd", "etc-passwd-"),
        ("a/b", "a-b-"),
        ("..", "unnamed-"),
        ("", "unnamed-"),
        ("/abs", "abs-"),
        ("FedAdamW (α=0.5)", "FedAdamW-0.5-"),
        ("fedadamw-digits-cnn-s0-077834509a", "fedadamw-digits-cnn-s0-077834509a"),
    ],
)
def test_safe_name_keeps_a_label_inside_its_folder(label: str, name: str, tmp_path: Path):
    """A label that is already a safe name is kept; a changed one gets its 8-digit hash."""
    got = safe_name(label)
    if name.endswith("-"):
        assert got.startswith(name) and len(got) == len(name) + 8
        assert all(c in "0123456789abcdef" for c in got[-8:])
    else:
        assert got == name
    assert child_folder(tmp_path, label).parent == tmp_path


def test_safe_name_never_maps_two_labels_to_one_folder():
    labels = ["α", "β", "a/b", "a-b", "a b", "", "..", "x" * 300, "x" * 299 + "y"]
    names = [safe_name(label) for label in labels]
    assert len(set(names)) == len(labels)
    assert max(len(n) for n in names) <= MAX_NAME
    assert safe_name("x" * 300) == safe_name("x" * 300)  # the same label, the same folder


def test_child_folder_refuses_a_symlink_out(tmp_path: Path):
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "link").symlink_to(tmp_path)
    with pytest.raises(FedbenchError, match="outside"):
        child_folder(tmp_path / "root", "link")


def test_the_lock_excludes_other_holders_and_is_visible(tmp_path: Path):
    # flock locks belong to an open file description, so two opens in one process conflict
    # exactly as two processes do.
    folder = RunFolder(tmp_path / "run")
    assert not folder.is_locked()
    with folder.lock():
        assert folder.is_locked()
        with pytest.raises(RunBusyError), folder.lock(wait=False):
            pass
    assert not folder.is_locked()
    with folder.lock(wait=False):  # free again, and the lock file stays
        assert folder.lock_file.is_file()


def test_attempts_count_up(tmp_path: Path):
    folder = RunFolder(tmp_path / "run")
    folder.path.mkdir()
    assert folder.start_attempt() == 1
    assert folder.start_attempt() == 2
    record = json.loads(folder.attempt.read_text())
    assert record["attempts"] == 2 and isinstance(record["pid"], int) and record["host"]


def test_write_json_atomic_leaves_no_temp_files(tmp_path: Path):
    write_json_atomic(tmp_path / "a.json", {"x": 1})
    write_json_atomic(tmp_path / "a.json", {"x": 2})
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]
    assert json.loads((tmp_path / "a.json").read_text()) == {"x": 2}


def test_run_status_from_the_folder_alone(tmp_path: Path):
    path = tmp_path / "run"
    folder = RunFolder(path)
    assert run_status(path).state == "pending" and run_status(path).group == "pending"

    path.mkdir()
    folder.config.write_text(yaml.safe_dump({"fl": {"rounds": 30}}))
    folder.start_attempt()
    folder.metrics.write_text(json.dumps({"round": 0}) + "\n" + json.dumps({"round": 10}) + "\n{")
    status = run_status(path)
    assert (status.state, status.group, status.round, status.rounds) == (
        "interrupted",
        "pending",
        10,  # the half-written last line is skipped
        30,
    )
    assert status.attempts == 1

    with folder.lock():
        assert run_status(path).state == "running"
        folder.write_summary({"status": "failed", "error": "RuntimeError: boom"})
        assert run_status(path).state == "running"  # a retry of a failed run runs
    failed = run_status(path)
    assert (failed.state, failed.group, failed.error) == ("failed", "failed", "RuntimeError: boom")

    for final in ("completed", "diverged"):
        folder.write_summary({"status": final, "error": None})
        assert run_status(path).state == final and run_status(path).group == "finished"


def test_a_run_filed_under_its_old_id_is_found_moved_and_still_opens_by_it(tmp_path: Path):
    """Shards runs' ids named the unused partition.alpha (`dir0.1`); a finished run filed under
    that id is neither orphaned nor listed twice when the id changes."""
    from fedbench.config import parse_run_config
    from fedbench.report.runs import find_run_folders

    cfg = parse_run_config({"partition": {"kind": "shards", "alpha": 0.1}})
    old = tmp_path / "runs" / cfg.run_id(legacy=True)
    assert "dir0.1" in old.name and "dir0.1" not in cfg.run_id()
    old.mkdir(parents=True)
    (old / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict()))
    (old / "summary.json").write_text(json.dumps({"status": "completed"}))
    folder = RunFolder.for_config(tmp_path, cfg)
    assert folder.path.name == cfg.run_id() and folder.is_finished()
    assert old.is_symlink() and old.resolve() == folder.path.resolve()
    assert RunFolder(child_folder(tmp_path / "runs", old.name)).is_finished()  # the old id
    assert find_run_folders(tmp_path) == [folder.path]
    assert RunFolder.for_config(tmp_path, cfg).path == folder.path  # stable on a second look
