"""configs/dp/*.yaml follow DESIGN.md's table format and their runs validate."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from fedbench.algorithms import ALGORITHMS
from fedbench.config import parse_run_config, set_path

CONFIGS = sorted((Path(__file__).parents[2] / "configs" / "dp").glob("*.yaml"))
KEYS = ["table", "title", "paper", "base", "grid", "methods", "seeds", "metrics", "presets"]


def merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def test_every_paper_table_has_a_config() -> None:
    names = {p.stem for p in CONFIGS}
    for n in range(2, 12):
        assert f"dp_table{n}" in names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_table_config_format_and_quick_runs_validate(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    assert list(doc) == KEYS
    assert doc["table"] == path.stem
    assert "quick" in doc["presets"]
    assert doc["presets"]["quick"]["data.name"] == "digits"
    for label, over in doc["methods"].items():
        if over["algorithm"]["name"] not in ALGORITHMS:
            continue  # base algorithm not merged yet (dp_scaffold, dp_fedadam, dp_fedlada)
        run = merge(doc["base"], over)
        for key, values in doc["grid"].items():
            set_path(run, key.split("."), values[0])
        for key, value in doc["presets"]["quick"].items():
            set_path(run, key.split("."), value)
        cfg = parse_run_config(run)
        assert cfg.privacy is not None, label
        assert cfg.data.name == "digits"
