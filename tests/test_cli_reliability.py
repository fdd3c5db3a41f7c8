"""The command line under faults: Ctrl-C in any command, --out that is a file, a report on a full
disk, names that sanitise alike, FOLDER:ROW with a ':' in FOLDER."""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from fedbench import files
from fedbench.report import compare
from tests.conftest import cli_command, cli_env, tiny_table_data

REPORT = ("summary.csv", "table.csv", "table.md", "table.tex")


@pytest.fixture
def swept(tmp_path: Path, tiny_table_path: Path, run_cli) -> Path:
    code, _, err = run_cli("run", str(tiny_table_path), "--preset", "quick", "--out", str(tmp_path))
    assert code == 0, err
    return tmp_path / "tiny-quick"


def _digests(folder: Path) -> dict[str, str]:
    return {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in REPORT}


def test_ctrl_c_in_any_command_is_one_resume_line_and_exit_130(swept: Path, run_cli, monkeypatch):
    from fedbench.report import build

    def pressed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(build, "build_view", pressed)
    code, _, err = run_cli("report", str(swept))
    assert code == 130 and err.count("\n") == 1
    assert err.startswith("interrupted; finished work is kept") and err.rstrip().endswith(
        f"resume: fedbench report {swept}"
    )


def test_a_report_on_a_full_disk_keeps_the_previous_report(swept: Path, run_cli, monkeypatch):
    before = _digests(swept)

    class Full:  # the disk fills while table.md is written (write(2) names no file)
        def __init__(self, fh) -> None:
            self.fh = fh

        def write(self, data: bytes) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name: str):
            return getattr(self.fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self.fh.close()

    def opening(path, mode):
        fh = open(path, mode)  # noqa: SIM115 (closed by the writer, through Full)
        return Full(fh) if ".table.md." in str(path) else fh

    monkeypatch.setattr(files, "open", opening, raising=False)
    code, _, err = run_cli("report", str(swept))
    assert code == 2 and err.startswith("error: No space left on device (ENOSPC): ")
    assert f"{swept / 'table.md'}; free disk space" in err
    assert _digests(swept)["table.md"] == before["table.md"]
    assert not [p for p in swept.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("below", [False, True])
def test_out_that_is_a_file_is_one_line(tmp_path: Path, run_cli, below: bool):
    a_file = tmp_path / "a-file"
    a_file.write_text("x\n")
    out = a_file / "sub" if below else a_file
    code, _, err = run_cli("train", "--out", str(out))
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(f"error: --out {out} is ") and "give a folder" in err


def test_two_tables_named_alike_once_sanitised_report_apart(tmp_path: Path, run_cli):
    folders = []
    for name in ("α", "β"):
        data = tiny_table_data()
        data["table"], data["seeds"] = name, [0]
        data["methods"] = {"Local SGD": data["methods"]["Local SGD"]}
        data["base"]["fl"]["rounds"] = 1
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data, allow_unicode=True))
        code, out, err = run_cli("run", str(path), "--out", str(tmp_path / "out"))
        assert code == 0, err
        folders.append(Path(out.split("report: ")[-1].split()[0]))
    assert folders[0] != folders[1]
    assert [yaml.safe_load((f / "plan.json").read_text())["table"]["table"] for f in folders] == [
        "α",
        "β",
    ]


def test_folder_row_splits_after_the_table_folder(tmp_path: Path):
    folder = tmp_path / "co:lon" / "tiny"
    folder.mkdir(parents=True)
    (folder / "plan.json").write_text("{}")
    assert compare.split_side(f"{folder}:FedAvg") == (str(folder), ":", "FedAvg")
    assert compare.split_side(f"{folder}:Fed:Avg") == (str(folder), ":", "Fed:Avg")
    assert compare.split_side("nowhere:x:y") == ("nowhere:x", ":", "y")
    assert compare.split_side("no-colon") == ("no-colon", "", "")


def _terminated(*args, **kwargs):
    import os
    import signal
    import time

    # Without fedbench's handler the signal would end the test process itself.
    assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None), "no SIGTERM handler"
    os.kill(os.getpid(), signal.SIGTERM)  # `kill PID`, `timeout`, a scheduler's time limit
    time.sleep(5)  # the signal ends the command long before this
    raise AssertionError("SIGTERM did not end the command")


def test_sigterm_ends_a_sweep_as_ctrl_c_does_with_its_resume_line_and_exit_143(
    tmp_path: Path, tiny_table_path: Path, run_cli, monkeypatch
):
    import signal

    from fedbench.runner import sweep

    monkeypatch.setattr(sweep, "run_sweep", _terminated)
    before = signal.getsignal(signal.SIGTERM)
    code, _, err = run_cli("run", str(tiny_table_path), "--out", str(tmp_path))
    assert code == 143, err
    assert err.startswith("interrupted") and err.count("\n") == 1
    assert err.rstrip().endswith(f"resume: fedbench run {tiny_table_path} --out {tmp_path}")
    assert signal.getsignal(signal.SIGTERM) is before  # the command's handler is gone


def test_sigterm_in_any_command_is_one_resume_line(run_cli, monkeypatch):
    from fedbench import catalog

    monkeypatch.setattr(catalog, "catalog", _terminated)
    code, _, err = run_cli("list", "tables")
    assert code == 143
    assert err.startswith("interrupted; finished work is kept") and err.rstrip().endswith(
        "resume: fedbench list tables"
    )


def test_write_plan_where_no_file_can_be_written_is_one_line(
    tmp_path: Path, tiny_table_path: Path, run_cli
):
    """`--write-plan /proc/version` ended in a FileNotFoundError traceback (no temporary can be
    made in /proc); a FIFO (or /dev/null) in its place was replaced by a regular file."""
    code, _, err = run_cli(
        "run", str(tiny_table_path), "--dry-run", "--write-plan", "/proc/version"
    )
    assert code == 2 and err == (
        "error: --write-plan /proc/version: cannot write it (No such file or directory); give the "
        "path of a file in a writable folder\n"
    )
    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    code, _, err = run_cli("run", str(tiny_table_path), "--dry-run", "--write-plan", str(fifo))
    assert code == 2 and err == (
        f"error: --write-plan {fifo} is not a regular file; give the path of a file to write\n"
    )
    assert fifo.is_fifo()


def _smoke_table(tmp_path: Path) -> Path:
    """The tiny table with more rows: its smoke check trains for a few seconds."""
    data = tiny_table_data()
    data["methods"] = {
        f"lr {lr}": {"algorithm": {"name": "fedavg", "lr": lr}} for lr in range(1, 9)
    }
    path = tmp_path / "smoke-table.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.slow
@pytest.mark.engine
@pytest.mark.parametrize(("number", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_during_smoke_removes_its_temporary_folders(tmp_path: Path, number, code):
    """SIGTERM during `--smoke` left fedbench-smoke-* folders in TMPDIR (Python died without
    unwinding); now it unwinds as Ctrl-C does, and exits 128 + the signal."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    process = subprocess.Popen(
        cli_command("run", str(_smoke_table(tmp_path)), "--smoke"),
        env={**cli_env(), "TMPDIR": str(temp)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not list(temp.glob("fedbench-smoke-runs-*")) and process.poll() is None:
        assert time.monotonic() < deadline, "no smoke folder appeared"
        time.sleep(0.05)
    assert process.poll() is None, "the smoke check ended before the signal"
    process.send_signal(number)
    _, err = process.communicate(timeout=120)
    # After a Ctrl-C the interpreter at times ends by re-raising SIGINT on itself (-2, as a shell
    # expects of a program stopped by Ctrl-C) instead of exit code 130: on main too.
    codes = (code, -number) if number == signal.SIGINT else (code,)
    assert process.returncode in codes and err.count("\n") == 1, err
    assert err.startswith("interrupted; ")
    assert [p.name for p in temp.iterdir() if p.name.startswith("fedbench")] == []


@pytest.mark.slow
@pytest.mark.engine
def test_a_closed_stdout_ends_quietly(tmp_path: Path):
    """`run TABLE --smoke | head -1` exited 1 (rich's answer to EPIPE); now the conventional
    128 + SIGPIPE, nothing on stderr, and the temporary folders removed."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    process = subprocess.Popen(
        cli_command("run", str(_smoke_table(tmp_path)), "--smoke"),
        env={**cli_env(), "TMPDIR": str(temp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stdout.readline().startswith(b"smoke ")
    process.stdout.close()  # `head -1` has read its line
    _, err = process.communicate(timeout=120)
    assert (process.returncode, err) == (128 + signal.SIGPIPE, b"")
    assert [p.name for p in temp.iterdir() if p.name.startswith("fedbench")] == []


@pytest.mark.parametrize(("name", "kind"), [("summary.json", "fifo"), ("metrics.jsonl", "deep")])
def test_report_and_runs_survive_a_hostile_run_file(
    swept: Path, run_cli, caplog, name: str, kind: str
):
    """A FIFO in place of summary.json made `report` and `runs` hang; JSON nested 100,000 deep
    ended in a 60-line RecursionError traceback. The report counts that run as missing (its seed
    named: fedbench.report.collect.read_run) with a warning naming the file; `runs` lists it as
    unreadable."""
    from tests.hostile import fifos_unblocked, hostile

    runs = swept.parent / "runs"
    run = sorted(runs.iterdir())[0]
    hostile(run / name, kind)
    what = {"fifo": "is a named pipe (FIFO), not a regular file", "deep": "line 1: nests lists"}
    with fifos_unblocked(runs):
        code, _, err = run_cli("report", str(swept))
        assert code == 0, err
        assert f"{run / name}: {what[kind]}" in caplog.text
        assert "the report counts the run as missing" in caplog.text
        assert "1 of " in (swept / "table.md").read_text()
        assert f"({name} {what[kind]}" in (swept / "table.md").read_text()
        code, out, err = run_cli("runs", str(swept.parent))
    assert code == 0 and f"{name} {what[kind]}" in caplog.text and "unreadable" in out
