"""Issue 47, point 1: `fedbench report A B --out DIR` merges table folders that share a setting
into one report, rows labelled by what tells them apart."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from fedbench.errors import FedbenchError
from fedbench.report.merge import merge_reports
from tests.report.test_privacy_utility import ACC, _folder, _table


def test_two_sweeps_of_one_table_merge_into_one_report(tmp_path: Path, run_cli) -> None:
    first = _folder(tmp_path / "a", _table("dp", True))
    second = _folder(tmp_path / "b", _table("dp", True, lr=0.05))
    out = tmp_path / "merged" / "both"
    code, _, err = run_cli("report", str(first), str(second), "--out", str(out))
    assert code == 0, err
    md = (out / "table.md").read_text()
    # DP-A ran lr 0.1 and 0.05: labelled by it; DP-B ran the same in both: by its folder.
    assert f"| DP-A, lr=0.1 | {_cell(ACC[('DP-A', 2.0)])} |" in md.replace("**", "")
    assert "| DP-A, lr=0.05 |" in md and f"| DP-B ({first}) |" in md
    long = pd.read_csv(out / "summary.csv")
    acc = long[long["metric"] == "test_acc"]
    assert len(acc) == 8  # 4 rows x 2 budgets
    plan = json.loads((out / "plan.json").read_text())
    assert plan["merged_from"] == [str(first), str(second)]
    # What a report reads of each run is copied next to it; a run is never linked.
    copied = list((tmp_path / "merged" / "runs").iterdir())
    assert copied and not any(p.is_symlink() for p in copied)
    assert {p.name for p in copied[0].iterdir()} == {"config.yaml", "metrics.jsonl", "summary.json"}
    assert (out / "privacy_utility.png").is_file()
    # Rebuilding the merged report needs only its folder.
    code, _, err = run_cli("report", str(out))
    assert code == 0, err


def _cell(values: list[float]) -> str:
    import statistics

    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"


def test_what_cannot_merge_is_a_one_line_error(tmp_path: Path, run_cli) -> None:
    private = _folder(tmp_path, _table("dp", True))
    plain = _folder(tmp_path, _table("plain", False))
    with pytest.raises(FedbenchError, match="not the same grid keys"):
        merge_reports([private, plain], tmp_path / "m")
    other = _folder(tmp_path / "o", _table("dp", True), overrides=["fl.rounds=5"])
    with pytest.raises(FedbenchError, match=r"do not share a setting: fl\.rounds"):
        merge_reports([private, other], tmp_path / "m")
    code, _, err = run_cli("report", str(private), str(other))
    assert code == 2 and "give --out DIR" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli("report", str(private), str(other), "--out", str(plain))
    assert code == 2 and "holds the plan of another table" in err
    assert not (tmp_path / "m").exists()
