"""Gradient clipping by global L2 norm: the one clip of a (non-private) local step.

g <- g * min(1, C / ||g||), with ||g|| the norm over every parameter's gradient. A step's
gradients come either as one client's tensors or stacked over rows (clients, or seeds x
clients: a leading dimension), and each row is clipped by its own norm. The sequential case is
the one-row case; its norm is reduced per tensor with `_foreach_norm`, the stacked one per row,
which are the reductions the engines have always used (results are bitwise those of earlier
versions). No host sync: the scale is a device tensor.
"""

from __future__ import annotations

import torch
from torch import Tensor


def client_norm(tensors: list[Tensor] | tuple[Tensor, ...], rows: int | None = None) -> Tensor:
    """||t||_2 over all of one client's tensors: a 0-d tensor, or with `rows` one per row of a
    leading dimension of that size (shape (rows,)). No host sync."""
    if rows is None:
        return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(tensors)))
    per_tensor = [torch.linalg.vector_norm(t.reshape(rows, -1), dim=1) for t in tensors]
    return torch.linalg.vector_norm(torch.stack(per_tensor), dim=0)


def per_row(factor: Tensor, like: Tensor) -> Tensor:
    """A factor per row (shape (rows,)) shaped to broadcast over the rows of `like`."""
    return factor.view(factor.shape[0], *([1] * (like.ndim - 1)))


def clip_by_norm_(grads: list[Tensor], max_norm: float | None, *, rows: bool = False) -> None:
    """Rescale `grads` in place so that its global L2 norm is <= max_norm (per row when
    `rows`: the leading dimension of every tensor); None: no clipping."""
    if max_norm is None:
        return
    scale = torch.clamp(max_norm / client_norm(grads, grads[0].shape[0] if rows else None), max=1.0)
    if not rows:
        torch._foreach_mul_(grads, scale)
        return
    for g in grads:
        g.mul_(per_row(scale, g))
