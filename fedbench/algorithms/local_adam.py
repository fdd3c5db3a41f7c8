"""Local Adam: a fresh torch.optim.Adam (coupled L2 weight decay) on every client every round
(Kingma & Ba, ICLR 2015; a baseline of the FedAdamW paper).

    m, v <- 0 at the start of each round;  k = 1..K
    g <- g + lambda * y
    m <- beta1*m + (1-beta1)*g ;  v <- beta2*v + (1-beta2)*g^2
    y <- y - eta_r * (m / (1-beta1^k)) / (sqrt(v / (1-beta2^k)) + eps)

Identical to recreating torch.optim.Adam(lr, betas, eps, weight_decay=lambda) each round. The
server averages the models (default step). comm_up d, comm_down d.
"""

from __future__ import annotations

import torch
from pydantic import Field

from fedbench.algorithms.adam import adam_step_, update_moments_
from fedbench.algorithms.base import (
    Algorithm,
    RoundInfo,
    State,
    Tensors,
    add_coupled_decay_,
    tensor_means,
    zeros_like,
)
from fedbench.algorithms.registry import ALGORITHMS
from fedbench.config import AlgorithmConfig


class LocalAdamConfig(AlgorithmConfig):
    name: str = "local_adam"
    beta1: float = Field(default=0.9, ge=0, lt=1)
    beta2: float = Field(default=0.999, ge=0, lt=1)
    eps: float = Field(default=1.0e-8, gt=0)


@ALGORITHMS.register("local_adam")
class LocalAdam(Algorithm):
    """Adam (coupled decay) restarted from zero moments every round."""

    Params = LocalAdamConfig
    paper = "Kingma & Ba 2015; baseline of Liu et al. 2026 (FedAdamW)"
    params: LocalAdamConfig

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        return {"m": zeros_like(x), "v": zeros_like(x)}

    def local_step(self, y: Tensors, g: Tensors, local: State, k: int, info: RoundInfo) -> None:
        p = self.params
        add_coupled_decay_(g, y, p.weight_decay)
        update_moments_(local["m"], local["v"], g, p.beta1, p.beta2)
        adam_step_(
            y,
            local["m"],
            local["v"],
            lr=info.lr,
            eps=p.eps,
            bias_correction1=1.0 - p.beta1**k,
            bias_correction2=1.0 - p.beta2**k,
        )

    def v_block_means(self, local: State) -> torch.Tensor | None:
        return tensor_means(local["v"])
