"""configs/dp/*.yaml follow DESIGN.md's table format and expand into valid private runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fedbench.runner.table_config import expand, parse_table_config

CONFIGS = sorted((Path(__file__).parents[2] / "configs" / "dp").glob("*.yaml"))
KEYS = ["table", "title", "paper", "base", "grid", "methods", "seeds", "metrics", "presets"]


def test_every_paper_table_has_a_config() -> None:
    names = {p.stem for p in CONFIGS}
    for n in range(2, 12):
        assert f"dp_table{n}" in names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_table_config_format_and_quick_runs_validate(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    assert list(doc) == KEYS
    assert doc["table"] == path.stem
    table = parse_table_config(doc, str(path))
    for preset in (None, "quick"):
        plan = expand(table, preset=preset, seeds=1)
        assert len(plan.runs) == len(table.methods) * len(table.settings())
        for run in plan.runs:
            assert run.cfg.privacy is not None, run.method
            assert (run.cfg.data.name == "digits") == (preset == "quick")
