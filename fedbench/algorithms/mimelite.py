"""MimeLite (Karimireddy et al., "Mime: Mimicking Centralized Stochastic Algorithms in Federated
Learning", arXiv:2008.03606, Algorithm 1 without the SVRG correction) with SGD + momentum as
the base optimizer: clients apply the server's momentum, frozen for the round, in every local
step; the server updates the momentum from the clients' gradients at the global model.

    y <- y - eta_r * ((1 - beta) * (g + lambda * y) + beta * m)        (each local step; m fixed)
    c_i = g_1 + lambda * x                                              (the gradient at x)
    x <- x + eta_g * Delta_bar ;  m <- (1 - beta) * mean_i c_i + beta * m   (server, m init 0)

Mime's Algorithm 1 computes c_i = grad f_i(x) over the client's whole local data
(`full_batch_gradient: true`: one extra pass over the client's samples at x, in batches of
fl.batch_size, before the local steps, with the local steps' grad_clip; BatchNorm statistics are
left as they were; both engines; not with sample-level DP, whose accountant does not count
that pass). The default (`false`) is the cheap form: the first local step's minibatch gradient,
taken at y = x, an unbiased estimate of grad f_i(x) that costs no extra pass (with sample-level
privacy, the privatised one). beta 0.9. comm_up 2d (Delta_i, c_i), comm_down 2d (x, m).
"""

from __future__ import annotations

import torch
from pydantic import Field

from fedbench.algorithms.base import (
    Algorithm,
    Floats,
    GradientOracle,
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
from fedbench.algorithms.full_gradient import FullGradientRule
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.registry import ALGORITHMS


class MimeLiteConfig(FedAvgConfig):
    name: str = "mimelite"
    beta: float = Field(default=0.9, ge=0, lt=1, description="momentum of the server statistic m")
    full_batch_gradient: bool = Field(
        default=False,
        description="c_i over the client's whole local data (Mime's Algorithm 1; one extra pass) "
        "instead of the first local minibatch gradient",
    )


@ALGORITHMS.register("mimelite")
class MimeLite(Algorithm, FullGradientRule):
    """Local SGD steps with the server's momentum m applied (and frozen) on every client."""

    Params = MimeLiteConfig
    paper = "Karimireddy et al. 2020 (arXiv:2008.03606), MimeLite with SGDm"
    params: MimeLiteConfig

    @classmethod
    def upload_size(cls, params: AlgorithmConfig) -> Floats:
        return Floats(d=2)  # Delta_i, c_i

    @classmethod
    def download_size(cls, params: AlgorithmConfig) -> Floats:
        return Floats(d=2)  # x, m

    @classmethod
    def uses_full_gradient(cls, params: AlgorithmConfig) -> bool:
        return isinstance(params, MimeLiteConfig) and params.full_batch_gradient

    def init_server_state(self, x: Tensors) -> State:
        return {"m": zeros_like(x)}

    def take_full_gradient(self, g: Tensors, x: Tensors, local: State) -> None:
        """c_i = grad f_i(x) + lambda x from the full local-data gradient g at x."""
        torch._foreach_copy_(local["c"], g)
        add_coupled_decay_(local["c"], x, self.params.weight_decay)

    def local_step_with_oracle(
        self, y: Tensors, gradient: GradientOracle, local: State, k: Scalar, info: RoundInfo
    ) -> None:
        if k == 1 and self.params.full_batch_gradient:  # y = x: the oracle's full gradient
            g = gradient.full()
            with torch.no_grad():
                self.take_full_gradient(g, y, local)
        super().local_step_with_oracle(y, gradient, local, k, info)

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        # beta * m, fixed for the whole round; c_i is filled at the first step.
        return {"beta_m": torch._foreach_mul(server["m"], self.params.beta), "c": zeros_like(x)}

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        add_coupled_decay_(g, y, self.params.weight_decay)
        if k == 1 and not self.params.full_batch_gradient:  # y = x: the gradient at x
            torch._foreach_copy_(local["c"], g)
        torch._foreach_mul_(g, 1.0 - self.params.beta)
        torch._foreach_add_(g, local["beta_m"])
        add_scaled_(y, g, -info.lr)

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        return {"delta": torch._foreach_sub(y, x), "grad": local["c"]}, client_state

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        super().server_update(x, mean, server, info)
        beta = self.params.beta
        torch._foreach_mul_(server["m"], beta)
        torch._foreach_add_(server["m"], mean["grad"], alpha=1.0 - beta)
