"""Independent federations as rows (fedbench.figures.particles): foreach ops under `per_row` equal
the foreach ops themselves (bitwise, CPU), and a reduction over the model stays per row."""

from __future__ import annotations

import torch
from torch import Tensor

from fedbench.figures.particles import ForeachPerTensor, per_row, select_rows


def _lists(seed: int) -> list[list[Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    return [
        [torch.rand(5, 3, generator=gen, dtype=torch.float64) + 0.5,
         torch.rand(5, 2, 2, generator=gen, dtype=torch.float64) + 0.5]
        for _ in range(4)
    ]  # fmt: skip


def _rule(y: list[Tensor], a: list[Tensor], b: list[Tensor], c: list[Tensor]) -> None:
    """Every kind of foreach op an update rule uses: in place and not, with scalars, scalar
    lists and alpha/value keywords."""
    torch._foreach_lerp_(y, a, 0.3)
    torch._foreach_addcmul_(y, a, b, value=0.5)
    torch._foreach_addcdiv_(y, a, torch._foreach_sqrt(b), [0.1, 0.2])
    torch._foreach_add_(y, c, alpha=-0.7)
    torch._foreach_mul_(c, torch._foreach_div(a, b))
    torch._foreach_copy_(b, c)
    torch._foreach_zero_(a)


def test_foreach_ops_per_row_equal_the_foreach_ops() -> None:
    direct, rows = _lists(0), _lists(0)
    _rule(*direct)

    def rule(lists: list[list[Tensor]]) -> None:
        with ForeachPerTensor():
            _rule(*lists)

    per_row(rule, rows)
    for got, want in zip(rows, direct, strict=True):
        assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))


def test_a_reduction_over_the_model_is_each_rows_own() -> None:
    v = _lists(1)[0]

    def center(lists: list[Tensor]) -> None:
        mean = torch.stack([t.sum() for t in lists]).sum() / sum(t.numel() for t in lists)
        with ForeachPerTensor():
            torch._foreach_sub_(lists, mean)

    expected = [t.clone() for t in v]
    row_means = (v[0].sum(dim=1) + v[1].sum(dim=(1, 2))) / 7
    per_row(center, v)
    torch.testing.assert_close(v[0], expected[0] - row_means[:, None], rtol=0, atol=1e-15)
    torch.testing.assert_close(v[1], expected[1] - row_means[:, None, None], rtol=0, atol=1e-15)
    kept = select_rows({"v": v}, torch.tensor([True, False, False, True, False]))
    assert [t.shape[0] for t in kept["v"]] == [2, 2]
