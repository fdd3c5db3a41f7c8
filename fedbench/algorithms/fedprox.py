"""FedProx (Li et al., MLSys 2020, Eq. 2): local SGD on the loss plus the proximal term
(mu/2)||y - x^r||^2.

    y <- y - eta_r * (g + lambda * y + mu * (y - x^r))     (each local step)
    x <- x + eta_g * Delta_bar                             (server, default step)

comm_up d, comm_down d (docs/algorithms.md, "Local SGD and server-side methods").
"""

from __future__ import annotations

import torch
from pydantic import Field

from fedbench.algorithms.base import (
    Algorithm,
    RoundInfo,
    Scalar,
    State,
    Tensors,
    add_coupled_decay_,
    add_scaled_,
)
from fedbench.algorithms.fedavg import FedAvgConfig
from fedbench.algorithms.registry import ALGORITHMS


class FedProxConfig(FedAvgConfig):
    name: str = "fedprox"
    mu: float = Field(
        default=0.01, ge=0, description="proximal weight pulling y towards the round's x"
    )


@ALGORITHMS.register("fedprox")
class FedProx(Algorithm):
    """Local SGD with a proximal pull towards the round's global model."""

    Params = FedProxConfig
    capturable_step = True
    paper = "Li et al. 2020 (MLSys), FedProx"
    params: FedProxConfig

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        # x is the engine's global model, untouched while the client trains.
        return {"x": x}

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        p = self.params
        add_coupled_decay_(g, y, p.weight_decay)
        if p.mu:
            torch._foreach_add_(g, torch._foreach_sub(y, local["x"]), alpha=p.mu)
        add_scaled_(y, g, -info.lr)
