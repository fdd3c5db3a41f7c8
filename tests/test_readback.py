"""fedbench.readback: every file read back is validated; a bad one is one BadFile line."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.errors import FedbenchError
from fedbench.metrics_log import read_rows
from fedbench.readback import (
    Attempt,
    BadFile,
    Checksum,
    Summary,
    TunedFile,
    json_depth,
    read_json_dict,
    read_plan_file,
    validate,
)
from tests.hostile import KINDS, fifos_unblocked, hostile


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b"[1, 2]", "holds a list where a Summary mapping belongs"),
        (b'"completed"', "holds a str where a Summary mapping belongs"),
        (b'{"status": "\xff\xfe"}', "is not UTF-8 text (byte 0xff at offset 12)"),
        (b'{"status": "completed", "final": "oops"}', "not a valid Summary: final:"),
        (b'{"final": {}}', "not a valid Summary: status: Field required"),
        (b"{not json", "is not JSON"),
        (b'{"status": "completed", "wall_s": "fast"}', "not a valid Summary: wall_s:"),
    ],
)
def test_a_bad_summary_is_one_line_naming_the_file_the_problem_and_the_fix(
    tmp_path: Path, content: bytes, what: str
):
    path = tmp_path / "summary.json"
    path.write_bytes(content)
    with pytest.raises(BadFile) as caught:
        read_json_dict(path, Summary, fix="remove it")
    message = str(caught.value)
    assert isinstance(caught.value, FedbenchError) and "\n" not in message
    assert message.startswith(f"{path}: ") and what in message and message.endswith("; remove it")


def test_a_diverged_runs_summary_with_non_finite_losses_reads(tmp_path: Path):
    path = tmp_path / "summary.json"
    path.write_text('{"status": "diverged", "final": {"train_loss": NaN, "test_loss": Infinity}}')
    data = read_json_dict(path, Summary, fix="")
    assert data["status"] == "diverged" and data["final"]["test_loss"] == float("inf")


def test_a_valid_summary_reads_with_its_extra_fields(tmp_path: Path):
    path = tmp_path / "summary.json"
    path.write_text('{"status": "completed", "final": {"test_acc": 41.5}, "git": "abc"}')
    data = read_json_dict(path, Summary, fix="")
    assert data["final"]["test_acc"] == 41.5 and data["git"] == "abc"
    assert data["status"] == "completed"


def test_a_folder_where_a_file_belongs_is_a_bad_file(tmp_path: Path):
    (tmp_path / "summary.json").mkdir()
    with pytest.raises(BadFile, match="is a folder, not a file"):
        read_json_dict(tmp_path / "summary.json", Summary, fix="")


def test_a_missing_file_is_file_not_found(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        read_json_dict(tmp_path / "summary.json", Summary, fix="")


@pytest.mark.parametrize(
    "content", ["{not json", '{"table": {}}', '{"table": {}, "runs": [{"method": "A"}]}']
)
def test_a_bad_plan_says_how_to_write_it_again(tmp_path: Path, content: str):
    path = tmp_path / "plan.json"
    path.write_text(content)
    with pytest.raises(BadFile, match="rerun the `fedbench run`"):
        read_plan_file(path)


@pytest.mark.parametrize(
    "rows",
    [
        {"FedAvg": [1, 2]},
        {"FedAvg": {"-": {"values": [1]}}},
        {"FedAvg": {"-": "fast"}},
    ],
)
def test_a_malformed_tuned_file_is_refused(tmp_path: Path, rows):
    with pytest.raises(BadFile, match="not a valid TunedFile"):
        validate(tmp_path / "tuned.yaml", {"table": "t", "rows": rows}, TunedFile, fix="")


def test_tuned_columns_read_as_text():
    doc = TunedFile.model_validate({"table": "t", "rows": {"A": {0.1: {"values": {"k": 1}}}}})
    assert list(doc.rows["A"]) == ["0.1"]


LOG = b'{"round": 0, "test_acc": 10.0}\n{"round": 1, "test_acc": "abc"}\n{"round": 2}\n'


def test_metric_rows_are_validated_a_bad_row_ends_the_log(tmp_path: Path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(LOG)
    assert read_rows(path) == [{"round": 0, "test_acc": 10.0}]


@pytest.mark.parametrize(
    ("line", "what"),
    [
        (b'{"round": 1, "test_acc": "abc"}', "line 2: test_acc is 'abc', not a number"),
        (b'{"test_acc": 0.5}', "line 2: round: Field required"),
        (b'{"round": 1.5}', "line 2: round: round must be a whole number"),
    ],
)
def test_a_finished_runs_log_read_strictly_names_the_bad_line(tmp_path: Path, line, what):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"round": 0, "test_acc": 10.0}\n' + line + b"\n")
    with pytest.raises(BadFile) as caught:
        read_rows(path, strict=True, fix="retrain it")
    assert what in str(caught.value)


def test_a_torn_last_line_is_not_a_bad_line_even_read_strictly(tmp_path: Path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"round": 0, "test_acc": 10.0}\n{"round": 1, "te')
    assert read_rows(path, strict=True) == [{"round": 0, "test_acc": 10.0}]


@pytest.mark.parametrize(
    ("schema", "kind", "what"),
    [
        (Summary, "fifo", "is a named pipe (FIFO), not a regular file"),
        (Summary, "deep", "nests lists or objects more than 64 deep"),
        (Summary, "huge", "is 8 GiB, more than the 16 MiB such a file may hold"),
        (Attempt, "huge", "is 8 GiB, more than the 1 MiB such a file may hold"),
        (Checksum, "fifo", "is a named pipe (FIFO), not a regular file"),
        (Checksum, "deep", "nests lists or objects more than 64 deep"),
    ],
)
def test_a_fifo_deep_nesting_or_a_huge_file_is_refused_before_it_is_parsed(
    tmp_path: Path, schema, kind: str, what: str
):
    path = tmp_path / "run.json"
    hostile(path, kind)
    with fifos_unblocked(tmp_path), pytest.raises(BadFile) as caught:
        read_json_dict(path, schema, fix="remove it")
    assert str(caught.value) == f"{path}: {what}; remove it"


def test_a_socket_or_a_device_is_refused_without_reading_it(tmp_path: Path):
    import socket

    path = tmp_path / "summary.json"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        with pytest.raises(BadFile, match=r"cannot be read \(No such device or address\)"):
            read_json_dict(path, Summary, fix="")
    with pytest.raises(BadFile, match="is a character device, not a regular file"):
        read_json_dict(Path("/dev/zero"), Summary, fix="")


def test_nesting_is_counted_outside_strings_only():
    assert json_depth('{"a": [1, {"b": "[[[{{{\\"]]]"}], "c": []}') == 3
    assert json_depth("[" * 65 + "]" * 65) is None and json_depth("[" * 64 + "]" * 64) == 64
    assert json_depth('"[[[["') == 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_metrics_log_is_a_bad_file_read_strictly_and_no_rows_otherwise(
    tmp_path: Path, kind: str
):
    path = tmp_path / "metrics.jsonl"
    hostile(path, kind)
    what = {
        "fifo": "is a named pipe (FIFO), not a regular file",
        "deep": "line 1: nests lists or objects more than 64 deep",
        "huge": "is 8 GiB, more than the 2 GiB such a file may hold",
    }[kind]
    with fifos_unblocked(tmp_path):
        with pytest.raises(BadFile) as caught:
            read_rows(path, strict=True, fix="retrain it")
        assert str(caught.value) == f"{path}: {what}; retrain it"
        assert read_rows(path) == []


def test_the_metrics_log_is_read_line_by_line_and_a_line_without_end_is_bounded(
    tmp_path: Path, monkeypatch
):
    from fedbench import metrics_log

    monkeypatch.setattr(metrics_log, "MAX_LINE_BYTES", 64)
    path = tmp_path / "metrics.jsonl"
    row = b'{"round": 0, "test_acc": 10.0}\n'
    path.write_bytes(row + b"0" * 10_000)  # no newline: read no further than 65 bytes
    with pytest.raises(BadFile, match="line 2: longer than 64 bytes"):
        read_rows(path, strict=True)
    assert read_rows(path) == [{"round": 0, "test_acc": 10.0}]
    path.write_bytes(row + b'{"round": 1, "te')  # a torn last line shorter than the bound
    assert read_rows(path, strict=True) == [{"round": 0, "test_acc": 10.0}]
    assert metrics_log.truncate(path, 5) == 1 and path.read_bytes() == row
