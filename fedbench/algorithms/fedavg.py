"""FedAvg (McMahan et al., 2017): local SGD with coupled weight decay, server averaging.

    y <- y - eta_r * (g + lambda * y)            (each local step)
    x <- x + eta_g * mean_i (y_i^K - x)          (server)

comm_up d, comm_down d (docs/algorithms.md, "Local SGD and server-side methods").
"""

from __future__ import annotations

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
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.registry import ALGORITHMS


class FedAvgConfig(AlgorithmConfig):
    name: str = "fedavg"
    lr: float = Field(default=0.1, gt=0)
    weight_decay: float = Field(default=1.0e-3, ge=0)


def sgd_step_(y: Tensors, g: Tensors, *, lr: Scalar, weight_decay: float) -> None:
    """y <- y - lr * (g + weight_decay * y); shared by the local-SGD family."""
    add_coupled_decay_(g, y, weight_decay)
    add_scaled_(y, g, -lr)


@ALGORITHMS.register("fedavg")
class FedAvg(Algorithm):
    """Federated averaging of local SGD."""

    Params = FedAvgConfig
    paper = "McMahan et al. 2017 (AISTATS)"
    capturable_step = True

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        sgd_step_(y, g, lr=info.lr, weight_decay=self.params.weight_decay)
