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
paper's choice). A client uploads its direction at the run's nominal K = fl.local_steps,
u_i = K d_i (= Delta_i when tau_i = K), and tau_i; the server applies
x <- x + eta_g * (tau_eff / K) * sum_i p_i u_i, the same step. With equal tau_i, u_i = Delta_i
and tau_eff / K = 1: FedAvg, bit for bit. The engine's drift diagnostic measures the spread of
the u_i, i.e. of the normalised updates.

Client-level DP (`privacy.level: client`, DP-FedNova): the private release is u_i, clipped to C
and noised exactly as DP-FedAvg's Delta_i; tau_i is public (`public_uploads`: drawn from the
run's seed, round and client id, never from data), so it is neither clipped nor noised and
tau_eff is exact. Each client's contribution K d_i has norm <= C, and the server step scales it
by tau_eff / K <= 1, so the sensitivity and the accounting are DP-FedAvg's; with equal K the run
is DP-FedAvg (the same clip and the same noise draw). comm_up d (u_i and one scalar tau_i),
comm_down d.
"""

from __future__ import annotations

import torch

from fedbench.algorithms.base import RoundInfo, State, Tensors, Upload
from fedbench.algorithms.fedavg import FedAvg, FedAvgConfig
from fedbench.algorithms.registry import ALGORITHMS


class FedNovaConfig(FedAvgConfig):
    name: str = "fednova"


@ALGORITHMS.register("fednova")
class FedNova(FedAvg):
    """Normalised averaging of local SGD for clients with different numbers of local steps."""

    Params = FedNovaConfig
    paper = "Wang et al. 2020 (NeurIPS), FedNova"

    public_uploads = frozenset({"tau"})

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        delta = torch._foreach_sub(y, x)
        tau = info.local_steps  # this client's own K_i
        if tau != info.run_steps:  # u_i = K d_i; untouched (= Delta_i) when tau_i = K
            torch._foreach_mul_(delta, info.run_steps / tau)
        return {"delta": delta, "tau": [x[0].new_tensor(float(tau))]}, client_state

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        # tau_eff / K, a device scalar (no host sync): exactly 1 when every client ran K steps,
        # and multiplying by 1 is exact, so the step is FedAvg's bit for bit.
        ratio = mean["tau"][0] / info.local_steps
        torch._foreach_add_(
            x, torch._foreach_mul(mean["delta"], ratio), alpha=self.params.server_lr
        )
