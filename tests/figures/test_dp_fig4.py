"""dp-fig4: the sqrt(v) centre shift on a problem where the paper's formula is exact, and the
figure end to end at tiny sizes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fedbench.algorithms.adam import update_moments_
from fedbench.figures.dp_fig4 import moments, sqrt_v_shift


def test_the_shift_of_sqrt_v_matches_sigma_c_over_sr_where_it_is_exact() -> None:
    """Zero clipped gradients: g_tilde is pure DP noise of std sigma C / sR, so E[v_hat] =
    (sigma C / sR)^2 exactly and sqrt(v_hat) concentrates at sigma C / sR for many steps; the
    clean run's v is 0."""
    sigma, clip, batch, beta1, beta2, steps = 1.0, 0.5, 16, 0.9, 0.999, 400
    noise = sigma * clip / batch
    gen = torch.Generator().manual_seed(0)
    dp_states, clean_states = [], []
    for _ in range(6):
        m, v = [torch.zeros(500, dtype=torch.float64)], [torch.zeros(500, dtype=torch.float64)]
        for _ in range(steps):
            g = [noise * torch.randn(500, generator=gen, dtype=torch.float64)]
            update_moments_(m, v, g, beta1, beta2)
        dp_states.append({"m": m, "v": v})
        clean_states.append({"m": [torch.zeros(500)], "v": [torch.zeros(500)]})
    _, dp_roots = moments(dp_states, beta2, steps)
    _, clean_roots = moments(clean_states, beta2, steps)
    mean_v_hat = np.mean(np.concatenate(dp_roots) ** 2)
    assert mean_v_hat == pytest.approx(noise**2, rel=0.02)  # Eq. 6, bias-corrected
    shift, (lo, hi) = sqrt_v_shift(dp_roots, clean_roots, 200, 0)
    assert shift == pytest.approx(noise, rel=0.01)
    assert lo <= shift <= hi and hi - lo < 0.01 * noise


@pytest.mark.slow
def test_the_dp_figure_end_to_end_at_tiny_sizes(tmp_path: Path) -> None:
    from fedbench.figures.make import make_figure

    made = make_figure(
        "dp-fig4",
        preset="quick",
        out=tmp_path,
        overrides=[
            "model=logreg", "clients=4", "rounds=1", "local_steps=2", "probe_clients=2",
            "bootstrap=10",
        ],
    )  # fmt: skip
    saved = json.loads((made.folder / "claims.json").read_text())
    extra = saved["extra"]
    assert extra["predicted"] == pytest.approx(1.0 * 1.0 / 16)  # sigma C / sR of the preset
    assert len(extra["runs"]) == 2 and extra["clients"] == [0, 1]
    assert saved["claims"][0]["statistic"].startswith("measured shift / predicted")
    assert saved["claims"][1]["holds"] is True  # noise of std 1/16 dwarfs logreg's clipped m
    assert (made.folder / "dp-fig4.png").stat().st_size > 10_000
    rows = (made.folder / "dp-fig4.csv").read_text().splitlines()
    assert rows[0].startswith("run,quantity,bin_lo,bin_hi,count") and len(rows) == 1 + 4 * 80


def test_m_alignment_claim_reads_the_shift_of_m_in_units_of_its_dp_width() -> None:
    """The paper's "centres of m aligned": holds when the 95% interval of the median shift lies
    within +-0.1 std(m with DP), does not when outside, else undecided."""
    from fedbench.figures.dp_fig4 import DPFig4Figure

    def verdict(shift: float, lo: float, hi: float) -> tuple[float, bool | None]:
        extra = {"std_m": {"dp": 2.0, "clean": 0.5}, "m_shift": shift, "m_shift_interval": [lo, hi]}
        claim = DPFig4Figure._m_alignment(extra)
        return claim.value, claim.holds

    assert verdict(0.02, -0.1, 0.15) == (pytest.approx(0.01), True)
    assert verdict(0.6, 0.4, 0.8) == (pytest.approx(0.3), False)
    assert verdict(0.2, 0.1, 0.3)[1] is None  # straddles 0.1 x 2.0 = 0.2
