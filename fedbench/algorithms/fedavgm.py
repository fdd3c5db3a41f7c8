"""FedAvgM (Hsu et al., 2019, "Measuring the effects of non-identical data distribution"):
FedAvg's clients with server momentum.

    y <- y - eta_r * (g + lambda * y)            (each local step, as fedavg)
    m <- beta * m + Delta_bar ;  x <- x + eta_g * m   (server, m = 0 initially, beta = momentum)

comm_up d, comm_down d (docs/algorithms.md, "Local SGD and server-side methods").
"""

from __future__ import annotations

import torch
from pydantic import Field

from fedbench.algorithms.base import Algorithm, RoundInfo, Scalar, State, Tensors, zeros_like
from fedbench.algorithms.fedavg import FedAvgConfig, sgd_step_
from fedbench.algorithms.registry import ALGORITHMS


class FedAvgMConfig(FedAvgConfig):
    name: str = "fedavgm"
    momentum: float = Field(
        default=0.9, ge=0, lt=1, description="server momentum beta on the mean update"
    )


@ALGORITHMS.register("fedavgm")
class FedAvgM(Algorithm):
    """Local SGD, server heavy-ball momentum on the averaged update."""

    Params = FedAvgMConfig
    capturable_step = True
    paper = "Hsu et al. 2019 (arXiv:1909.06335)"
    params: FedAvgMConfig

    def init_server_state(self, x: Tensors) -> State:
        return {"m": zeros_like(x)}

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        torch._foreach_mul_(server["m"], self.params.momentum)
        torch._foreach_add_(server["m"], mean["delta"])
        torch._foreach_add_(x, server["m"], alpha=self.params.server_lr)

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        sgd_step_(y, g, lr=info.lr, weight_decay=self.params.weight_decay)
