"""fedadamw-hessian: partition labels, the diagonal-block share on a Hessian that is
block-diagonal by construction, the HVP estimate against the exact value, and the figure end to
end at tiny sizes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from fedbench.algorithms.base import ParamSpec
from fedbench.figures.fedadamw_hessian import (
    block_mass,
    estimated_masses,
    exact_hessian,
    hvp_function,
    partition_labels,
    random_masses,
)


def _one_hot_logreg() -> tuple[nn.Module, torch.Tensor, torch.Tensor, np.ndarray]:
    """Logistic regression (no bias) on one-hot inputs: sample n only touches column j(n) of W,
    so the Hessian is block-diagonal by input column; labels give each coordinate its column."""
    torch.manual_seed(0)
    model = nn.Linear(5, 3, bias=False).double()
    cols = torch.arange(40) % 5
    x = nn.functional.one_hot(cols, 5).double()
    y = torch.randint(0, 3, (40,))
    labels = np.tile(np.arange(5), 3)  # W is (3, 5), flattened row-major: coordinate -> column
    return model, x, y, labels


def test_a_block_diagonal_hessian_has_all_its_mass_in_the_blocks() -> None:
    model, x, y, labels = _one_hot_logreg()
    hessian = exact_hessian(model, x, y)
    reference = torch.autograd.functional.hessian(
        lambda w: nn.functional.cross_entropy(x @ w.view(3, 5).T, y),
        model.weight.detach().reshape(-1),
    )
    np.testing.assert_allclose(hessian, reference.numpy(), atol=1e-12)
    h2 = hessian**2
    assert block_mass(h2, labels) == pytest.approx(1.0, abs=1e-12)
    randoms = random_masses(h2, labels, 50, 0)
    assert randoms.max() < 0.9  # a random partition of the same sizes misses most of it
    assert block_mass(h2, np.zeros_like(labels)) == pytest.approx(1.0)  # `global`


@pytest.mark.slow  # ~80 HVP calls: a few seconds on a quiet CPU
def test_hvp_estimate_matches_the_exact_block_mass() -> None:
    model, x, y, labels = _one_hot_logreg()
    h2 = exact_hessian(model, x, y) ** 2
    rows = np.repeat(np.arange(3), 5)  # blocks by output row: not the Hessian's blocks
    hvp, d = hvp_function(model, x, y)
    est_cols, est_rows = estimated_masses(hvp, d, [labels, rows], probes=25, seed=0)
    # For a block-diagonal H, H(z * t) = t * Hz blockwise: the estimate is exact at any probes.
    assert est_cols == pytest.approx(1.0, abs=1e-9)
    assert est_rows == pytest.approx(block_mass(h2, rows), abs=0.15)
    assert block_mass(h2, rows) < 0.9


def test_partition_labels_follow_the_block_layouts() -> None:
    spec = ParamSpec(
        names=["0.weight", "0.bias", "1.weight"],
        shapes=[torch.Size([4, 3]), torch.Size([4]), torch.Size([2, 4])],
        heads={},
    )
    hessian = partition_labels("hessian", spec)
    assert len(hessian) == 12 + 4 + 8
    assert np.bincount(hessian).tolist() == [3, 3, 3, 3, 4, 4, 4]  # per row, bias, per row
    assert np.bincount(partition_labels("tensor", spec)).tolist() == [12, 4, 8]
    assert set(partition_labels("global", spec)) == {0}


@pytest.mark.slow
def test_the_hessian_figure_end_to_end_at_tiny_sizes(tmp_path: Path) -> None:
    from fedbench.figures.make import make_figure

    made = make_figure(
        "fedadamw-hessian",
        preset="quick",
        out=tmp_path,
        overrides=[
            "train_rounds=1", "at=1.0", "mlp_at=[0.0, 1.0]", "hessian_samples=4",
            "random_draws=3", "clients=4", "local_steps=1", "exact_max=2500", "probes=1",
        ],
    )  # fmt: skip
    saved = json.loads((made.folder / "claims.json").read_text())
    transformer, mlps = saved["extra"]["transformer"], saved["extra"]["mlp"]
    assert not transformer["exact"] and transformer["tensors"] == []  # 2,714 > 2,500: HVPs
    assert [m["round"] for m in mlps] == [0, 1] and all(m["exact"] for m in mlps)
    assert mlps[0]["partitions"]["global"]["mass"] == pytest.approx(1.0)
    assert len(made.claims) == 4
    assert (made.folder / "fedadamw-hessian.png").stat().st_size > 10_000
    table = (made.folder / "fedadamw-hessian.csv").read_text().splitlines()
    assert table[0].startswith("model,round,partition") and len(table) == 1 + 3 * 4


def test_claims_report_the_block_share_and_test_near_block_diagonal_at_the_threshold() -> None:
    """More mass than random partitions (0.07 against 0.03) is not "near block-diagonal": that
    verdict needs the share itself at or above the stated threshold (0.5 by default)."""
    import pandas as pd

    from fedbench.figures import FIGURES
    from fedbench.figures.base import FigureData
    from fedbench.figures.make import figure_settings

    def snap(round_: int, mass: float) -> dict:
        share = {"mass": mass, "blocks": 10, "random_mean": 0.03, "random_lo": 0.02}
        return {"round": round_, "partitions": {"hessian": {**share, "random_hi": 0.04}}}

    data = FigureData(
        pd.DataFrame(), {"transformer": snap(1, 0.07), "mlp": [snap(0, 0.6), snap(5, 0.9)]}
    )
    settings = figure_settings(FIGURES.get("fedadamw-hessian"), "quick", [])
    near_t, above_t, near_m, above_m = FIGURES.get("fedadamw-hessian")().claims(data, settings)
    assert (near_t.holds, above_t.holds, near_m.holds, above_m.holds) == (False, True, True, True)
    assert near_t.value == pytest.approx(0.07) and near_m.value == pytest.approx(0.6)
    assert "at least 0.5 of ||H||_F^2" in near_t.statement and "threshold 0.5" in near_t.statistic
    assert "random partition of the same sizes: 0.03" in near_t.statistic
    strict = figure_settings(FIGURES.get("fedadamw-hessian"), "quick", ["near_block_diagonal=0.7"])
    assert FIGURES.get("fedadamw-hessian")().claims(data, strict)[2].holds is False
