"""The one clip: global L2 norm, per row when stacked, against a hand computation."""

from __future__ import annotations

import math

import torch

from fedbench.step import clip_by_norm_


def _grads() -> list[torch.Tensor]:
    return [
        torch.tensor([[3.0, 0.0], [0.0, 0.0]], dtype=torch.float64),
        torch.tensor([4.0], dtype=torch.float64),
    ]


def test_one_client_is_scaled_to_the_clip() -> None:
    g = _grads()  # ||g|| = 5
    clip_by_norm_(g, 1.0)
    assert abs(g[0][0, 0].item() - 0.6) < 1e-15 and abs(g[1].item() - 0.8) < 1e-15
    g = _grads()
    clip_by_norm_(g, 10.0)  # below the clip: unchanged
    assert g[0][0, 0].item() == 3.0 and g[1].item() == 4.0
    g = _grads()
    clip_by_norm_(g, None)
    assert g[1].item() == 4.0


def test_rows_are_clipped_by_their_own_norms() -> None:
    a = torch.tensor([[3.0, 4.0], [0.3, 0.4]], dtype=torch.float64)  # rows' norms: 5 and 0.5
    b = torch.tensor([[0.0], [1.2]], dtype=torch.float64)  # rows: 5 and 1.3 in all
    clip_by_norm_([a, b], 1.0, rows=True)
    assert torch.allclose(a[0], torch.tensor([0.6, 0.8], dtype=torch.float64), atol=1e-15)
    scale = 1.0 / math.sqrt(0.25 + 1.44)
    assert abs(a[1, 0].item() - 0.3 * scale) < 1e-15 and abs(b[1, 0].item() - 1.2 * scale) < 1e-15


def test_rows_equal_each_row_clipped_alone() -> None:
    torch.manual_seed(0)
    stacked = [torch.randn(4, 3, 2, dtype=torch.float64), torch.randn(4, 5, dtype=torch.float64)]
    rows = [[t[i].clone() for t in stacked] for i in range(4)]
    clip_by_norm_(stacked, 0.7, rows=True)
    for i, row in enumerate(rows):
        clip_by_norm_(row, 0.7)
        for got, want in zip([t[i] for t in stacked], row, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-15)
