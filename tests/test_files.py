"""fedbench.files: the one atomic writer, its stale temporaries, deferred Ctrl-C, safe names."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fedbench.files import (
    interrupts_deferred,
    remove_stale_temporaries,
    temporary_folder,
    temporary_name,
    write_file,
    write_json,
)


def test_write_file_replaces_the_file_and_leaves_nothing_else(tmp_path: Path):
    path = tmp_path / "table.md"
    write_file(path, "old ±\n")
    write_file(path, b"new bytes")
    write_file(path, lambda fh: fh.write(b"from a writer"))
    assert path.read_bytes() == b"from a writer"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.md"]


def test_text_is_utf8_whatever_the_locale(tmp_path: Path):
    path = tmp_path / "table.md"
    write_file(path, "0.5 ± 0.1")
    assert path.read_bytes() == "0.5 ± 0.1".encode()


def test_a_failed_write_keeps_the_previous_file_removes_the_temporary_and_names_the_file(
    tmp_path: Path,
):
    path = tmp_path / "table.csv"
    write_file(path, "complete report\n")

    def full_disk(fh) -> None:
        fh.write(b"half a rep")
        raise OSError(errno.ENOSPC, "No space left on device")  # write(2) names no file

    with pytest.raises(OSError) as caught:
        write_file(path, full_disk)
    assert caught.value.filename == str(path)
    assert path.read_text() == "complete report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.csv"]


def test_an_interrupt_inside_the_write_keeps_the_previous_file(tmp_path: Path):
    path = tmp_path / "a.json"
    write_json(path, {"x": 1})

    def interrupted(fh) -> None:
        fh.write(b"{")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_file(path, interrupted)
    assert path.read_text() == '{\n  "x": 1\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]


def test_a_ctrl_c_during_a_write_is_raised_once_the_file_is_complete(tmp_path: Path):
    path = tmp_path / "checkpoint.pt"

    def signalled(fh) -> None:
        fh.write(b"first half ")
        os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, delivered mid-write
        fh.write(b"second half")

    with pytest.raises(KeyboardInterrupt):
        write_file(path, signalled)
    assert path.read_bytes() == b"first half second half"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_interrupts_deferred_leaves_another_handler_alone():
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, _frame: seen.append(number))
    try:
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)


def test_stale_temporaries_of_dead_processes_go_live_ones_stay(tmp_path: Path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    dead_pid = int(dead.stdout)
    stale = tmp_path / f".summary.json.{dead_pid}.deadbeef.tmp"
    live = temporary_name(tmp_path / "plan.json")  # this process: being written
    other = tmp_path / "notes.tmp"  # not a temporary of fedbench's
    for path in (stale, live, other):
        path.write_text("x")
    assert remove_stale_temporaries(tmp_path) == [stale]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, "notes.tmp"])
    assert remove_stale_temporaries(tmp_path / "missing") == []


def _ctrl_c_after_mkdir(monkeypatch, tmp_path: Path) -> None:
    """A Ctrl-C delivered the moment tempfile's mkdir has made a folder in `tmp_path` (what a
    watcher that signals once it sees the folder appear does, on a loaded machine)."""
    made = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def mkdtemp(*args, **kwargs):
        path = made(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        return path

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)


def test_a_ctrl_c_just_after_the_temporary_folder_is_made_still_removes_it(
    monkeypatch, tmp_path: Path
):
    """tempfile.TemporaryDirectory registers its cleanup after mkdtemp returned: an interrupt in
    between left the folder (the smoke check's SIGTERM flake)."""
    _ctrl_c_after_mkdir(monkeypatch, tmp_path)
    with pytest.raises(KeyboardInterrupt), temporary_folder("fedbench-x-") as folder:
        (folder / "run").mkdir()  # never reached: the interrupt is raised on entry
    assert list(tmp_path.iterdir()) == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_during_the_smoke_check_leaves_no_temporary_folder(monkeypatch, tmp_path: Path):
    from fedbench.runner.smoke.run import run_cells

    _ctrl_c_after_mkdir(monkeypatch, tmp_path)
    with pytest.raises(KeyboardInterrupt):
        run_cells([], print)
    assert list(tmp_path.iterdir()) == []


def test_the_temporary_folder_is_removed_whatever_ends_the_block(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with temporary_folder("fedbench-x-") as folder:
        assert folder.is_dir() and folder.parent == tmp_path
        assert folder.name.startswith("fedbench-x-")
        (folder / "runs" / "a").mkdir(parents=True)
    with pytest.raises(ValueError), temporary_folder("fedbench-x-") as folder:
        (folder / "file").write_text("x")
        raise ValueError
    assert list(tmp_path.iterdir()) == []
