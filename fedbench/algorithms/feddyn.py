"""FedDyn (Acar et al., "Federated Learning Based on Dynamic Regularization", ICLR 2021,
Algorithm 1): each client minimises its loss plus a linear and a quadratic term that make the
stationary points of the clients' objectives agree with the global one.

Client i, sampled in round r, from the global model x = theta^{r-1}, with the gradient of its
loss at its last local model, grad_i (kept across rounds; zero before its first visit):

    y <- y - eta_r * (g - grad_i + alpha * (y - x) + lambda * y)        (each local step:
         SGD on L_i(y) - <grad_i, y> + alpha/2 ||y - x||^2, plus coupled weight decay)
    grad_i <- grad_i - alpha * (y^K - x)                                 (first-order condition)

Server, with h (init 0) summed over ALL N clients (the paper's m), S clients sampled:

    h <- h - alpha * (1/N) * sum_{i in S} (y_i^K - x)
    x <- x + eta_g * Delta_bar - h / alpha                               (eta_g = 1: the paper's
         theta^r = mean_i theta_i^r - h / alpha)

The sum over S is S times the mean upload, a plain mean: Algorithm 1 has no client weights.
`weighting: samples` is refused: a sample-weighted mean in h's update is not Algorithm 1 and
breaks its invariant h = (1/N) sum_i grad_i (the authors' code keeps the plain means and folds
n_i into a per-client alpha_i = alpha / w_i instead, which fedbench does not offer). alpha
(0.01) is the paper's code default (it tunes alpha in {0.1, 0.01, 0.001}). comm_up d,
comm_down d.
"""

from __future__ import annotations

import torch
from pydantic import Field, model_validator

from fedbench.algorithms.base import (
    Algorithm,
    RoundInfo,
    Scalar,
    State,
    Tensors,
    Upload,
    add_coupled_decay_,
    add_scaled_,
    zeros_like,
)
from fedbench.algorithms.fedavg import FedAvgConfig
from fedbench.algorithms.registry import ALGORITHMS


class FedDynConfig(FedAvgConfig):
    name: str = "feddyn"
    alpha: float = Field(
        default=0.01, gt=0, description="dynamic-regularisation strength (the paper's alpha)"
    )

    @model_validator(mode="after")
    def _uniform_weights(self) -> FedDynConfig:
        if self.weighting != "uniform":
            raise ValueError(
                "feddyn averages uniformly (Acar et al., Algorithm 1; a sample-weighted mean "
                "breaks h = mean_i grad_i): use weighting uniform"
            )
        return self


@ALGORITHMS.register("feddyn")
class FedDyn(Algorithm):
    """Local SGD on a dynamically regularised objective; server state h over all N clients."""

    Params = FedDynConfig
    capturable_step = True
    paper = "Acar et al. 2021 (ICLR), FedDyn, Algorithm 1"
    client_state_desc = "grad_i, its loss gradient at its last local model (d floats)"
    params: FedDynConfig

    def init_server_state(self, x: Tensors) -> State:
        return {"h": zeros_like(x)}

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        grad_i = client_state["grad"] if client_state is not None else zeros_like(x)
        # x is the global model: the engine leaves it unchanged until the server step, so the
        # local state may keep it without a copy.
        return {"grad": grad_i, "x": x}

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        alpha = self.params.alpha
        add_coupled_decay_(g, y, self.params.weight_decay)
        torch._foreach_sub_(g, local["grad"])
        torch._foreach_add_(g, torch._foreach_sub(y, local["x"]), alpha=alpha)
        add_scaled_(y, g, -info.lr)

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        delta = torch._foreach_sub(y, x)
        grad = torch._foreach_add(local["grad"], delta, alpha=-self.params.alpha)
        return {"delta": delta}, {"grad": grad}

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        alpha = self.params.alpha
        # (1/N) * sum over the S sampled clients = (S/N) * their mean.
        torch._foreach_add_(
            server["h"], mean["delta"], alpha=-alpha * info.sampled / info.num_clients
        )
        torch._foreach_add_(x, mean["delta"], alpha=self.params.server_lr)
        torch._foreach_add_(x, server["h"], alpha=-1.0 / alpha)
