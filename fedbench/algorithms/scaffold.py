"""SCAFFOLD (Karimireddy et al., ICML 2020, Algorithm 1, option II): local SGD corrected by
control variates.

Server control variate c (init 0); one c_i per client (init 0), kept across rounds for all N
clients in the engine's client-state store.
    y <- y - eta_r * (g + lambda*y - c_i + c)                  (each local step)
    c_i+ = c_i - c + (x^r - y^K) / (K * eta_r)                 (option II)
    Delta_c_i = c_i+ - c_i ;  c_i <- c_i+
    x <- x + eta_g * Delta_bar ;  c <- c + (1/N) * sum_{i in S} Delta_c_i   (N = all clients)

The correction enters the update itself: adding a detached scalar to the loss (as some public
code does) has zero gradient and silently turns SCAFFOLD into FedAvg. comm_up 2d (Delta_i,
Delta_c_i), comm_down 2d (x, c).
"""

from __future__ import annotations

import torch

from fedbench.algorithms.base import (
    Algorithm,
    Floats,
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
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.registry import ALGORITHMS


class ScaffoldConfig(FedAvgConfig):
    name: str = "scaffold"


@ALGORITHMS.register("scaffold")
class Scaffold(Algorithm):
    """Local SGD with client/server control variates (variance reduction of client drift)."""

    Params = ScaffoldConfig
    capturable_step = True
    paper = "Karimireddy et al. 2020 (ICML), option II"
    client_state_desc = "c_i (d floats)"
    params: ScaffoldConfig

    @classmethod
    def upload_size(cls, params: AlgorithmConfig) -> Floats:
        # pragma: no mutate block
        return Floats(d=2)  # Delta_i, Delta_c_i

    @classmethod
    def download_size(cls, params: AlgorithmConfig) -> Floats:
        return Floats(d=2)  # x, c

    def init_server_state(self, x: Tensors) -> State:
        return {"c": zeros_like(x)}

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        super().server_update(x, mean, server, info)
        # (1/N) * sum over the S sampled clients = (S/N) * their mean (with `weighting: samples`
        # the mean is sample-weighted, the natural generalisation).
        torch._foreach_add_(server["c"], mean["delta_c"], alpha=info.sampled / info.num_clients)

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        c_i = client_state["c"] if client_state is not None else zeros_like(x)
        return {"c_i": c_i, "correction": torch._foreach_sub(server["c"], c_i)}

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        add_coupled_decay_(g, y, self.params.weight_decay)
        torch._foreach_add_(g, local["correction"])  # g + lambda*y - c_i + c
        add_scaled_(y, g, -info.lr)

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        delta = torch._foreach_sub(y, x)
        # Delta_c_i = c_i+ - c_i = -c + (x - y) / (K * eta_r) = -(correction + c_i) - delta/(K eta)
        delta_c = torch._foreach_add(local["correction"], local["c_i"])
        add_scaled_(delta_c, delta, 1.0 / info.lr_sum)
        torch._foreach_neg_(delta_c)
        new_c_i = torch._foreach_add(local["c_i"], delta_c)
        return {"delta": delta, "delta_c": delta_c}, {"c": new_c_i}
