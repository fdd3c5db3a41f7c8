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


def clip_by_norm_(grads: list[Tensor], max_norm: float | None, *, rows: bool = False) -> None:
    """Rescale `grads` in place so that its global L2 norm is <= max_norm (per row when
    `rows`: the leading dimension of every tensor); None: no clipping."""
    if max_norm is None:
        return
    if not rows:
        total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        torch._foreach_mul_(grads, torch.clamp(max_norm / total, max=1.0))
        return
    s = grads[0].shape[0]
    norms = torch.stack([torch.linalg.vector_norm(g.reshape(s, -1), dim=1) for g in grads])
    scale = torch.clamp(max_norm / torch.linalg.vector_norm(norms, dim=0), max=1.0)
    for g in grads:
        g.mul_(scale.view(s, *([1] * (g.ndim - 1))))
