from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fedbench.cli import main
from tests.conftest import tiny_table_data


def run_cli(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setattr("sys.argv", ["fedbench", *args])
    try:
        main()
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_unknown_algorithm_is_exit_2_one_line(tmp_path, monkeypatch, capsys):
    data = tiny_table_data()
    data["methods"]["SCAFFOLD"] = {"algorithm": {"name": "not_an_algorithm"}}
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    assert run_cli(monkeypatch, "run", str(path), "--out", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: tiny row 'SCAFFOLD'") and "\n" not in err
    assert not (tmp_path / "o").exists()


def test_dry_run_prints_plan_and_cost(tiny_table_path: Path, tmp_path, monkeypatch, capsys):
    code = run_cli(
        monkeypatch,
        "run",
        str(tiny_table_path),
        "--dry-run",
        "--preset",
        "quick",
        "--out",
        str(tmp_path / "o"),
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "4 runs" in out and "client steps" in out
    assert not (tmp_path / "o").exists()
