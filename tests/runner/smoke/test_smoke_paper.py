"""CI's smoke check of the paper settings: the covering cells (fedbench.runner.smoke.coverage)
of every table and ablation whose models fit a 2-core CPU - every update rule under each privacy
mode, engine and precision the tables use, and every such model at its real input shape - each
trained for one short round at its real shapes. Swin, ViT-Base and RoBERTa-Base cells need a
GPU to finish in minutes: `make gpu-check` covers them (docs/smoke.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.runner.smoke.coverage import HEAVY, all_table_cells, covering, model_key, rule_key
from fedbench.runner.smoke.run import run_cells

pytestmark = [pytest.mark.slow, pytest.mark.engine]

#: Models that a smoke run on a 2-core CPU would take minutes for (Swin, ViT-Base, RoBERTa-Base).
GPU_ONLY = {name for name, cost in HEAVY.items() if cost > 2}


def test_every_covering_cell_that_fits_a_cpu_trains(tmp_path: Path, capsys) -> None:
    cells = [c for c in all_table_cells(tmp_path) if c.cfg.model.name not in GPU_ONLY]
    chosen = covering(cells)
    with capsys.disabled():  # the covered combinations, listed in CI's output
        print(f"\nsmoke (CI): {len(chosen)} covering cells of {len(cells)}")
        outcomes = run_cells(chosen, lambda line: print(f"  {line}"))
    failed = [o.line() for o in outcomes if not o.ok and not o.refused]
    assert not failed, failed
    refused = [o.label for o in outcomes if o.refused]
    assert all("FedCAda" in label for label in refused), refused  # not implemented, by design
    assert {model_key(c.cfg) for c in chosen} == {model_key(c.cfg) for c in cells}
    assert {rule_key(c.cfg) for c in chosen} == {rule_key(c.cfg) for c in cells}
