"""Signum (Bernstein et al. 2018, "signSGD: Compressed Optimisation for Non-Convex Problems",
ICML, Algorithm 3) as a federated client rule: every local step moves each weight by the same
amount, against the sign of a momentum of its gradients.

    m <- beta * m + (1 - beta) * (g + lambda * y)   (m = 0 at the start of each round)
    y <- y - eta_r * sign(m)                        (each local step)
    x <- x + eta_g * mean_i (y_i^K - x)             (server: fedbench's default step)
"""

from __future__ import annotations

import torch
from fedbench.algorithms import ALGORITHMS, Algorithm, AlgorithmConfig
from fedbench.algorithms.base import (
    RoundInfo,
    Scalar,
    State,
    Tensors,
    add_coupled_decay_,
    add_scaled_,
    zeros_like,
)
from pydantic import Field


class SignumConfig(AlgorithmConfig):
    name: str = "signum"
    lr: float = Field(default=1.0e-3, gt=0, description="the step of every weight, eta_0")
    weight_decay: float = Field(default=0.0, ge=0, description="coupled weight decay lambda")
    beta: float = Field(
        default=0.9, ge=0, lt=1, description="momentum of the gradients whose sign is the step"
    )


@ALGORITHMS.register("signum")
class Signum(Algorithm):
    """Local Signum: steps of one size against the sign of a momentum of the gradients."""

    Params = SignumConfig
    paper = "Bernstein et al. 2018 (ICML), signSGD, Algorithm 3 (Signum), as local steps"
    params: SignumConfig

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        return {"m": zeros_like(x)}  # the momentum restarts every round: no client state

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        p = self.params
        add_coupled_decay_(g, y, p.weight_decay)
        torch._foreach_mul_(local["m"], p.beta)
        torch._foreach_add_(local["m"], g, alpha=1.0 - p.beta)
        add_scaled_(y, torch._foreach_sign(local["m"]), -info.lr)
