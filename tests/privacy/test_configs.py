"""configs/dp/*.yaml follow DESIGN.md's table format and expand into valid private runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fedbench.runner.table_config import expand, parse_table_config

CONFIGS = sorted((Path(__file__).parents[2] / "configs" / "dp").glob("*.yaml"))
KEYS = ["table", "title", "note", "paper", "base", "grid", "methods", "seeds", "metrics", "presets"]
OPTIONAL = {"column_overrides"}  # after `grid` where present
#: Columns whose delta is 1e-6 in the DP-FedAdamW paper (Tables 15 and 16); 1e-5 elsewhere.
DELTA_1E6 = {"tinyimagenet", "glue/qqp", "glue/mnli"}


def test_every_paper_table_has_a_config() -> None:
    names = {p.stem for p in CONFIGS}
    for n in range(2, 12):
        assert f"dp_table{n}" in names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_table_config_format_and_quick_runs_validate(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    assert [k for k in doc if k not in OPTIONAL] == KEYS
    if "column_overrides" in doc:
        assert list(doc).index("column_overrides") == list(doc).index("grid") + 1
    assert doc["table"] == path.stem
    table = parse_table_config(doc, str(path))
    for preset in (None, "quick"):
        plan = expand(table, preset=preset, seeds=1)
        assert len(plan.runs) == len(table.methods) * len(table.settings())
        for run in plan.runs:
            assert run.cfg.privacy is not None, run.method
            assert (run.cfg.data.name == "digits") == (preset == "quick")


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_paper_privacy_settings_per_column_and_dp_paper_blocks(path: Path) -> None:
    """delta 1e-6 exactly for Tiny-ImageNet, QQP and MNLI (full and quick presets alike); every
    DP-FedAdamW row uses the DP paper's partition; every report carries the lower-numbers note."""
    table = parse_table_config(yaml.safe_load(path.read_text()), str(path))
    assert "expected to be lower than the paper's" in table.note
    for preset in (None, "quick"):
        for run in expand(table, preset=preset, seeds=1).runs:
            column_data = run.setting.get("data.name", table.base["data"]["name"])
            expected = 1.0e-6 if column_data in DELTA_1E6 else 1.0e-5
            assert run.cfg.privacy.delta == expected, (run.method, run.setting)
            if run.cfg.algorithm.name == "dp_fedadamw":
                assert run.cfg.algorithm.blocks == "dp_paper", run.method


def test_glue_table_is_dirichlet_08() -> None:
    path = next(p for p in CONFIGS if p.stem == "dp_table4")
    table = parse_table_config(yaml.safe_load(path.read_text()), str(path))
    for preset in (None, "quick"):
        assert {r.cfg.partition.alpha for r in expand(table, preset=preset, seeds=1).runs} == {0.8}
