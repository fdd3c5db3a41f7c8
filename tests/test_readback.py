"""fedbench.readback: every file read back is validated; a bad one is one BadFile line."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.errors import FedbenchError
from fedbench.metrics_log import read_rows
from fedbench.readback import (
    BadFile,
    Summary,
    TunedFile,
    read_json_dict,
    read_plan_file,
    validate,
)


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
