"""FedCM (Xu et al., 2021, "FedCM: Federated Learning with Client-level Momentum", Algorithm 1):
every local step mixes the fresh gradient with the server's broadcast global direction.

    d_r = -Delta_bar^{r-1} / (K * eta_{r-1})   (zero at r = 0; the previous round's mean gradient)
    y <- y - eta_r * (alpha * g + (1 - alpha) * d_r + lambda * y)      (each local step)
    x <- x + eta_g * Delta_bar                                          (server, default step)

alpha (0.1) is the weight on the fresh local gradient. comm_up d, comm_down 2d (x and d_r; the
paper counts 1x, its upload).
"""

from __future__ import annotations

import torch
from pydantic import Field

from fedbench.algorithms.base import (
    Algorithm,
    Floats,
    RoundInfo,
    Scalar,
    State,
    Tensors,
    mean_gradient,
    zeros_like,
)
from fedbench.algorithms.fedavg import FedAvgConfig, sgd_step_
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.registry import ALGORITHMS


class FedCMConfig(FedAvgConfig):
    name: str = "fedcm"
    alpha: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="weight of the fresh gradient; 1 - alpha: last round's global direction",
    )


@ALGORITHMS.register("fedcm")
class FedCM(Algorithm):
    """Local SGD on a client-level momentum: alpha * g + (1 - alpha) * global direction."""

    Params = FedCMConfig
    capturable_step = True
    paper = "Xu et al. 2021 (arXiv:2106.10874), FedCM"
    params: FedCMConfig

    @classmethod
    def download_size(cls, params: AlgorithmConfig) -> Floats:
        return Floats(d=2)  # x, the global direction d_r

    def init_server_state(self, x: Tensors) -> State:
        return {"direction": zeros_like(x)}

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        super().server_update(x, mean, server, info)
        server["direction"] = mean_gradient(mean["delta"], info)

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        return {"global_term": torch._foreach_mul(server["direction"], 1.0 - self.params.alpha)}

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        p = self.params
        torch._foreach_mul_(g, p.alpha)
        torch._foreach_add_(g, local["global_term"])
        sgd_step_(y, g, lr=info.lr, weight_decay=p.weight_decay)
