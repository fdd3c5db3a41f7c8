"""Local AdamW: a fresh torch.optim.AdamW on every client every round (FedAdamW paper, baseline).

    m, v <- 0 at the start of each round;  k = 1..K
    m <- beta1*m + (1-beta1)*g;  v <- beta2*v + (1-beta2)*g^2
    y <- y - eta_r * ( (m/(1-beta1^k)) / (sqrt(v/(1-beta2^k)) + eps) + lambda*y )

The server averages the models (FedAvg step). comm_up d, comm_down d.
"""

from __future__ import annotations

import torch
from pydantic import Field

from fedbench.algorithms.adam import adam_step_, decay_and_update_moments_
from fedbench.algorithms.base import (
    Algorithm,
    RoundInfo,
    Scalar,
    State,
    Tensors,
    tensor_means,
    zeros_like,
)
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.registry import ALGORITHMS


class LocalAdamWConfig(AlgorithmConfig):
    name: str = "local_adamw"
    beta1: float = Field(default=0.9, ge=0, lt=1, description="first-moment decay")
    beta2: float = Field(default=0.999, ge=0, lt=1, description="second-moment decay")
    eps: float = Field(default=1.0e-8, gt=0, description="added to sqrt(v_hat) in the step")


@ALGORITHMS.register("local_adamw")
class LocalAdamW(Algorithm):
    """AdamW restarted from zero moments every round."""

    Params = LocalAdamWConfig
    capturable_step = True
    paper = "Loshchilov & Hutter 2019; baseline of Liu et al. 2026 (FedAdamW)"
    params: LocalAdamWConfig
    #: AdamW's decoupled decay; Local Adam adds lambda*y to g before the moments instead.
    decoupled_decay: bool = True

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        return {"m": zeros_like(x), "v": zeros_like(x)}

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        p = self.params
        decay_and_update_moments_(y, g, local, p, lr=info.lr, decoupled=self.decoupled_decay)
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
