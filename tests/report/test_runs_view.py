"""`fedbench runs` and `fedbench plot` below the command line: the output format, the listing
as text or table, a metric the runs lack."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from rich.table import Table

from fedbench.errors import FedbenchError
from fedbench.report.runs import check_metric, output_format, runs_view


def test_output_format() -> None:
    assert output_format("table") == "table"
    assert output_format("json") == "json"
    assert output_format("table", csv=True) == "csv"
    assert output_format("csv", csv=True) == "csv"
    with pytest.raises(FedbenchError, match="--format 'xml' is not a format"):
        output_format("xml")
    with pytest.raises(FedbenchError, match="--csv and --format json disagree"):
        output_format("json", csv=True)


def _run(root: Path, name: str, algorithm: str, acc: float) -> None:
    folder = root / "runs" / name
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(yaml.safe_dump({"algorithm": {"name": algorithm}}))
    (folder / "metrics.jsonl").write_text(json.dumps({"round": 2, "test_acc": acc}) + "\n")
    summary = {"status": "completed", "final": {"round": 2, "test_acc": acc}}
    (folder / "summary.json").write_text(json.dumps(summary))


def test_runs_view_as_csv_json_and_table(tmp_path: Path) -> None:
    _run(tmp_path, "a", "fedavg", 50.0)
    _run(tmp_path, "b", "fedadamw", 61.5)
    csv = runs_view(tmp_path, format_="csv")
    assert isinstance(csv, str)
    lines = csv.splitlines()
    assert lines[0].startswith("run_id,status,algorithm.name,round,test_acc")
    assert lines[1].startswith("a,completed,fedavg,2,50.0")
    records = json.loads(runs_view(tmp_path, ["algorithm.name=fedadamw"], "json"))
    assert [(r["run_id"], r["test_acc"]) for r in records] == [("b", 61.5)]
    table = runs_view(tmp_path)
    assert isinstance(table, Table)
    assert table.title.startswith(f"runs in {tmp_path}: 2")


def test_check_metric_names_the_metrics_the_runs_have() -> None:
    series = {
        "fedavg": pd.DataFrame({"round": [1], "test_acc": [50.0], "train_loss": [1.0]}),
        "fedadamw": pd.DataFrame({"round": [1], "test_acc": [60.0]}),
    }
    check_metric(series, "test_acc")
    with pytest.raises(FedbenchError) as caught:
        check_metric(series, "train_loss")
    assert str(caught.value) == (
        "--metric train_loss is not in the metrics.jsonl of fedadamw; "
        "choose one of test_acc, train_loss"
    )
