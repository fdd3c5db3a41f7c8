from __future__ import annotations

from pathlib import Path

import yaml

from tests.conftest import tiny_table_data


def test_unknown_algorithm_is_exit_2_one_line(tmp_path, run_cli):
    data = tiny_table_data()
    data["methods"]["SCAFFOLD"] = {"algorithm": {"name": "not_an_algorithm"}}
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    code, _, err = run_cli("run", str(path), "--out", str(tmp_path / "o"))
    assert code == 2
    err = err.strip()
    assert err.startswith("error: tiny row 'SCAFFOLD'") and "\n" not in err
    assert not (tmp_path / "o").exists()


def test_dry_run_prints_plan_and_cost(tiny_table_path: Path, tmp_path, run_cli):
    code, out, _ = run_cli(
        "run",
        str(tiny_table_path),
        "--dry-run",
        "--preset",
        "quick",
        "--out",
        str(tmp_path / "o"),
    )
    assert code == 0
    assert "4 runs" in out and "client steps" in out
    assert not (tmp_path / "o").exists()


def test_dry_run_labels_columns_by_what_runs_with_the_preset(run_cli, tmp_path):
    code, out, err = run_cli(
        "run",
        "table1",
        "--preset",
        "quick",
        "--methods",
        "FedAvg",
        "--seeds",
        "1",
        "--dry-run",
        "--out",
        str(tmp_path / "o"),
    )
    assert code == 0, err
    assert "CNN for ResNet-18 / Dir-0.6" in out and "LogReg for ViT-Tiny / Dir-0.1" in out
    assert "model.name=resnet18" not in out
    assert "what runs: preset quick: digits, model CNN or LogReg (per column)" in out
