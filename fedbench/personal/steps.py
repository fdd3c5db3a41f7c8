"""What the personal-model methods (Ditto, APFL, Per-FedAvg, pFedMe) share: a gradient of the
step's batch at another point than the resident weights, and the copies a personal model is
kept in.

Every executor's gradient oracle (`GradientOracle`) differentiates the loss at the current y,
the resident model (or the stacked rows). A rule that needs g at its personal model v puts v
into y for the call and y's own values back after it, the way FedSAM evaluates its second
gradient at y + e: one mechanism, so that the personal gradient is clipped, privatised and
counted (`round_gradients`) exactly as every other gradient of the run, on either executor.
"""

from __future__ import annotations

import torch

from fedbench.algorithms.base import GradientOracle, Tensors, TensorSeq


def copies(tensors: TensorSeq) -> Tensors:
    """Detached copies (a stored state must not alias the resident model or a stacked row)."""
    return [t.detach().clone() for t in tensors]


def gradient_at(y: Tensors, point: TensorSeq, gradient: GradientOracle) -> Tensors:
    """g on the step's batch at `point` instead of at y; y is unchanged afterwards."""
    with torch.no_grad():
        saved = copies(y)
        torch._foreach_copy_(y, point)
    g = gradient()
    with torch.no_grad():
        torch._foreach_copy_(y, saved)
    return g
