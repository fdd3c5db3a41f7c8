"""FedAdamom (CVPR 2026, "Adaptive Momentum for Improved Generalization in Federated
Optimization"; docs/algorithms.md, "Local SGD and server-side methods"): FedAvg's clients, a server momentum whose
coefficient adapts per coordinate to the size of that coordinate's second moment relative to the
model-wide mean.

Server m = 0, v = 0 (d-vectors):
    v <- beta2 * v + (1 - beta2) * Delta_bar^2
    v_mean = mean of all d coordinates of v (one scalar over all trainable parameters)
    beta1 = clamp(1 - v / v_mean, 0, 1 - eps_m)   elementwise;  beta1 = 0 where v_mean == 0
    m <- beta1 * m + (1 - beta1) * Delta_bar
    x <- x + eta_g * m
beta2 (0.1) weighs the OLD v (small = short memory); eps_m 1e-3; no bias correction. Clients:
local SGD, lr 0.1 with exp decay 0.998, coupled weight decay 1e-3. comm_up d, comm_down d.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import Tensor

from fedbench.algorithms.base import Algorithm, RoundInfo, Scalar, State, Tensors, zeros_like
from fedbench.algorithms.fedavg import FedAvgConfig, sgd_step_
from fedbench.algorithms.registry import ALGORITHMS


class FedAdamomConfig(FedAvgConfig):
    name: str = "fedadamom"
    lr_schedule: Literal["constant", "cosine", "exp"] = "exp"
    lr_decay: float = Field(default=0.998, gt=0)
    beta2: float = Field(
        default=0.1, ge=0, lt=1, description="decay of the server's v (small: a short memory)"
    )
    eps_m: float = Field(
        default=1.0e-3, gt=0, le=1, description="caps the per-coordinate momentum at 1 - eps_m"
    )


def adaptive_beta1(v: Tensors, eps_m: float) -> Tensors:
    """beta1 = clamp(1 - v / mean(v), 0, 1 - eps_m) per coordinate; 0 everywhere if mean(v) == 0."""
    total = torch.stack([t.sum() for t in v]).sum()
    v_mean = total / sum(t.numel() for t in v)
    out: list[Tensor] = []
    for t in v:
        # Where v_mean == 0, v / v_mean is nan; torch.where picks 0 before it can propagate.
        ratio = torch.where(v_mean > 0, t / torch.where(v_mean > 0, v_mean, 1.0), 1.0)
        out.append(torch.clamp(1.0 - ratio, min=0.0, max=1.0 - eps_m))
    return out


@ALGORITHMS.register("fedadamom")
class FedAdamom(Algorithm):
    """Local SGD; server momentum with a per-coordinate, v-adaptive beta1."""

    Params = FedAdamomConfig
    capturable_step = True
    paper = "FedAdamom, CVPR 2026 (server adaptive momentum)"
    params: FedAdamomConfig

    def init_server_state(self, x: Tensors) -> State:
        return {"m": zeros_like(x), "v": zeros_like(x)}

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        p = self.params
        delta = mean["delta"]
        torch._foreach_mul_(server["v"], p.beta2)
        torch._foreach_addcmul_(server["v"], delta, delta, value=1.0 - p.beta2)
        beta1 = adaptive_beta1(server["v"], p.eps_m)
        # m <- beta1*m + (1-beta1)*Delta_bar == m + (1-beta1)*(Delta_bar - m)
        weight = [1.0 - b for b in beta1]
        torch._foreach_addcmul_(server["m"], weight, torch._foreach_sub(delta, server["m"]))
        torch._foreach_add_(x, server["m"], alpha=p.server_lr)

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        sgd_step_(y, g, lr=info.lr, weight_decay=self.params.weight_decay)
