"""FedNova (Wang, Liu, Liang, Joshi & Poor, "Tackling the Objective Inconsistency Problem in
Heterogeneous Federated Optimization", NeurIPS 2020, Eq. 6-7 with local SGD): clients that run
different numbers of local steps tau_i (fl.local_steps_min) would pull FedAvg's average toward
the clients that ran longest; FedNova averages each client's update normalised by its steps and
rescales by the effective number of steps.

    y <- y - eta_r * (g + lambda * y)                       (each local step; tau_i steps)
    d_i = (y_i^{tau_i} - x) / tau_i                          (local SGD: ||a_i||_1 = tau_i)
    tau_eff = sum_i p_i tau_i
    x <- x + eta_g * tau_eff * sum_i p_i d_i                 (server)

p_i are the round's aggregation weights (`weighting`: 1/S, or n_i / sum n with `samples`, the
paper's choice). The engine's weighted mean of the uploads gives both sums: a client uploads
d_i and tau_i besides Delta_i (which the engine checks and measures drift on). With equal
tau_i this is FedAvg. comm_up d (d_i and one scalar tau_i), comm_down d.
"""

from __future__ import annotations

import torch

from fedbench.algorithms.base import RoundInfo, State, Tensors
from fedbench.algorithms.fedavg import FedAvg, FedAvgConfig
from fedbench.algorithms.registry import ALGORITHMS


class FedNovaConfig(FedAvgConfig):
    name: str = "fednova"


@ALGORITHMS.register("fednova")
class FedNova(FedAvg):
    """Normalised averaging of local SGD for clients with different numbers of local steps."""

    Params = FedNovaConfig
    paper = "Wang et al. 2020 (NeurIPS), FedNova"

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[dict[str, Tensors], State | None]:
        delta = torch._foreach_sub(y, x)
        tau = float(info.local_steps)  # this client's own K_i
        normalised = torch._foreach_div(delta, tau)
        return {
            "delta": delta,
            "normalised": normalised,
            "tau": [x[0].new_tensor(tau)],
        }, client_state

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        tau_eff = float(mean["tau"][0])
        torch._foreach_add_(x, mean["normalised"], alpha=self.params.server_lr * tau_eff)
