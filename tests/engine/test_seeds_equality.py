"""What fedbench claims about seeds trained together (`runtime.seeds_together`): equal to their
separate runs to float rounding (float64: 1e-12), never "exactly"; summary.json says so."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fedbench.engine.run import RunResult
from fedbench.engine.run_seeds import train_together
from fedbench.engine.seeds import EQUALITY
from tests.engine.test_seeds import _cfg, _difference, _separately, prepare64

ROOT = Path(__file__).resolve().parents[2]

#: Where seeds trained together are described.
PAGES = ["docs/runs.md", "docs/performance.md", "docs/sweeps.md", "README.md"]

#: Claims of bitwise equality with separate runs.
EXACT = re.compile(r"exactly as|does not change any (run id or )?result|bitwise equal", re.I)


def _paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs, list items and table rows apart."""
    pieces = re.split(r"\n\s*\n|\n(?=\s*- )|\n(?=\|)", text)
    return [" ".join(piece.split()) for piece in pieces]


def test_no_page_claims_seeds_together_equal_separate_runs_exactly() -> None:
    told = []
    for page in PAGES:
        for paragraph in _paragraphs((ROOT / page).read_text()):
            if "seeds_together" in paragraph or "trained together" in paragraph.lower():
                assert not EXACT.search(paragraph), f"{page}: {paragraph[:200]}"
                told.append(paragraph)
    assert any("float rounding" in p for p in told)  # the claim that is made instead
    assert EQUALITY["equality"] == "float rounding" and "1e-12" in EQUALITY["measured"]


@pytest.mark.engine
def test_summary_names_the_group_and_the_equality_and_float64_agrees(tmp_path: Path) -> None:
    cfgs = [_cfg(seed, "fedadamw", "fl.rounds=2") for seed in (1, 2)]
    results = train_together(cfgs, tmp_path / "together", save_model=True, prepare=prepare64)
    alone = _separately(cfgs, tmp_path / "alone")
    for result, folder in zip(results, alone, strict=True):
        assert isinstance(result, RunResult)
        summary = json.loads((result.run_dir / "summary.json").read_text())
        assert summary["seeds_together"] == {"group": 2, **EQUALITY}
        assert json.loads((folder / "summary.json").read_text())["seeds_together"] is None
        assert _difference(result.run_dir, folder) <= 1e-12
