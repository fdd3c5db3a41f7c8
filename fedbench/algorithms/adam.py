"""Adam moment updates over lists of tensors, written exactly as torch.optim.Adam(W) computes
them so that the Adam-family local rules reproduce PyTorch's optimizers bit for bit in float64."""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import Tensor

from fedbench.algorithms.base import Scalar, add_coupled_decay_, addcdiv_scaled_, sqrt


def update_moments_(
    m: list[Tensor], v: list[Tensor], g: list[Tensor], beta1: float, beta2: float
) -> None:
    """m <- beta1*m + (1-beta1)*g;  v <- beta2*v + (1-beta2)*g^2  (in place)."""
    torch._foreach_lerp_(m, g, 1.0 - beta1)
    torch._foreach_mul_(v, beta2)
    torch._foreach_addcmul_(v, g, g, value=1.0 - beta2)


class AdamMoments(Protocol):
    """The hyperparameters an Adam-family config names the same way (read-only: configs are
    frozen)."""

    @property
    def beta1(self) -> float: ...
    @property
    def beta2(self) -> float: ...
    @property
    def weight_decay(self) -> float: ...


def decay_and_update_moments_(
    y: list[Tensor],
    g: list[Tensor],
    local: dict[str, Any],
    p: AdamMoments,
    *,
    lr: Scalar,
    decoupled: bool,
) -> None:
    """An Adam-family local step up to its adaptive step, on local["m"] and local["v"], with the
    weight decay of either kind: coupled (Adam's L2: g <- g + lambda*y before the moments) or
    decoupled (AdamW, Loshchilov & Hutter 2019: y <- (1 - lr*lambda) * y after them, as
    torch.optim.AdamW orders it)."""
    if not decoupled:
        add_coupled_decay_(g, y, p.weight_decay)
    update_moments_(local["m"], local["v"], g, p.beta1, p.beta2)
    if decoupled and p.weight_decay:
        torch._foreach_mul_(y, 1.0 - lr * p.weight_decay)


def adam_step_(
    y: list[Tensor],
    m: list[Tensor],
    v: list[Tensor],
    *,
    lr: Scalar,
    bias_correction1: Scalar,
    bias_correction2: Scalar,
    eps: float,
) -> None:
    """y <- y - lr * (m / bc1) / (sqrt(v / bc2) + eps), computed in torch.optim.Adam's order
    (with Python scalars; with 0-d tensor scalars, a captured step, the same up to rounding)."""
    denom = torch._foreach_sqrt(v)
    torch._foreach_div_(denom, sqrt(bias_correction2))
    torch._foreach_add_(denom, eps)
    addcdiv_scaled_(y, m, denom, -lr / bias_correction1)
