"""FAFED (Wu, Huang, Hu, Huang, AAAI 2023, "Faster Adaptive Federated Learning"): clients run
STORM momentum (momentum-based variance reduction) preconditioned by an adaptive matrix that is
shared by all clients and held fixed between communications; x, m and v are averaged at every
communication. A baseline of the FedAdamom paper; DP-FAFED (Table 9 of DP-FedAdamW) is dp_fafed.

Round r: the client starts from the server's averages (y = x, m = m_bar, v = v_bar) and fixes
H = sqrt(v_bar) + rho. Local step k (both gradients on the step's batch b_k):
    y_old = y;  y <- y - eta_r * m / H
    m <- g(y; b_k) + (1 - a) * (m - g(y_old; b_k))           (STORM)
    v <- beta2 * v + (1 - beta2) * g(y; b_k)^2
g includes coupled weight decay (g + lambda * y at its own point). Upload Delta_i, m_i, v_i;
server: x <- x + eta_g * Delta_bar (eta_g = 1: the average), m_bar, v_bar <- means.
First round: FAFED starts from m_0 = g(x_0), v_0 = g(x_0)^2; with no average yet, each client's
first step computes them from its own gradient (and H from its own v_0) instead of moving.

Partial participation (FAFED is analysed with full participation): clients that are not sampled
keep nothing; a sampled client starts from the latest averages, which is exactly FAFED's state
after a communication under full participation, and costs no per-client memory.

Choices where the paper's text available to fedbench is silent (documented in docs/algorithms.md):
a 0.1 (STORM weight of the fresh gradient), beta2 0.999, rho 0.1, client lr 0.01. H is fixed
for a whole round from v_bar, so a coordinate whose v is still ~0 takes steps lr * m / rho: with
rho 1e-3 a CNN on digits diverged in its first round (test loss ~1900), with rho 0.1 it trains. Two gradients per local step (DP accounting counts both). comm_up 3d, comm_down 3d.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import torch
from pydantic import Field

from fedbench.algorithms.base import (
    Algorithm,
    Floats,
    RoundInfo,
    State,
    Tensors,
    add_coupled_decay_,
)
from fedbench.algorithms.fedavg import FedAvgConfig
from fedbench.algorithms.params import AlgorithmConfig
from fedbench.algorithms.registry import ALGORITHMS


class FAFEDConfig(FedAvgConfig):
    name: str = "fafed"
    lr: float = Field(default=1.0e-2, gt=0, description="client learning rate (eta_0)")
    alpha: float = Field(default=0.1, gt=0, le=1, description="STORM weight a")
    beta2: float = Field(
        default=0.999, ge=0, lt=1, description="decay of v, the adaptive matrix's moment"
    )
    rho: float = Field(default=0.1, gt=0, description="H = sqrt(v) + rho")


@ALGORITHMS.register("fafed")
class FAFED(Algorithm):
    """Client STORM momentum with a shared adaptive matrix; x, m, v averaged every round."""

    Params = FAFEDConfig
    paper = "Wu et al., AAAI 2023, FAFED (Faster Adaptive Federated Learning)"
    params: FAFEDConfig
    #: STORM evaluates the gradient at the new and at the previous point on the same batch.
    gradients_per_step: ClassVar[int] = 2
    #: The step needs the gradient oracle, which the vectorised engine does not provide.
    supports_vectorized: ClassVar[bool] = False

    @classmethod
    def upload_size(cls, params: AlgorithmConfig) -> Floats:
        return Floats(d=3)  # Delta_i, m_i, v_i

    @classmethod
    def download_size(cls, params: AlgorithmConfig) -> Floats:
        return Floats(d=3)  # x, m_bar, v_bar

    def init_server_state(self, x: Tensors) -> State:
        # m and v appear after the first round (FAFED's m_0, v_0 come from the clients).
        return {}

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        torch._foreach_add_(x, mean["delta"], alpha=self.params.server_lr)
        server["m"] = [t.clone() for t in mean["m"]]
        server["v"] = [t.clone() for t in mean["v"]]

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        if "m" not in server:
            return {"m": None, "v": None, "h": None}
        h = torch._foreach_sqrt(server["v"])
        torch._foreach_add_(h, self.params.rho)
        return {
            "m": [t.clone() for t in server["m"]],
            "v": [t.clone() for t in server["v"]],
            "h": h,
        }

    def _gradient_at(self, y: Tensors, gradient: Callable[[], Tensors]) -> Tensors:
        """g(y) + lambda * y: the gradient of the (coupled-decay) loss at the current y."""
        g = [t.detach().clone() for t in gradient()]
        with torch.no_grad():
            add_coupled_decay_(g, y, self.params.weight_decay)
        return g

    def local_step_with_oracle(
        self,
        y: Tensors,
        gradient: Callable[[], Tensors],
        local: State,
        k: int,
        info: RoundInfo,
    ) -> None:
        """One FAFED step; the engine calls this with a function computing g at y on the step's
        batch (twice: at the new and at the previous point)."""
        p = self.params
        if local["m"] is None:  # first round, first step: FAFED's initialisation
            g = self._gradient_at(y, gradient)
            with torch.no_grad():
                local["m"], local["v"] = g, torch._foreach_mul(g, g)
                local["h"] = torch._foreach_sqrt(local["v"])
                torch._foreach_add_(local["h"], p.rho)
            return
        with torch.no_grad():
            y_old = [t.detach().clone() for t in y]
            torch._foreach_addcdiv_(y, local["m"], local["h"], value=-info.lr)
            y_new = [t.detach().clone() for t in y]
        g_new = self._gradient_at(y, gradient)
        with torch.no_grad():
            torch._foreach_copy_(y, y_old)
        g_old = self._gradient_at(y, gradient)
        with torch.no_grad():
            torch._foreach_copy_(y, y_new)
            # m <- g_new + (1 - a) * (m - g_old)
            torch._foreach_sub_(local["m"], g_old)
            torch._foreach_mul_(local["m"], 1.0 - p.alpha)
            torch._foreach_add_(local["m"], g_new)
            torch._foreach_mul_(local["v"], p.beta2)
            torch._foreach_addcmul_(local["v"], g_new, g_new, value=1.0 - p.beta2)

    def local_step(self, y: Tensors, g: Tensors, local: State, k: int, info: RoundInfo) -> None:
        raise TypeError(
            "fafed needs the gradient at two points per step: call local_step_with_oracle"
        )

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[dict[str, Tensors], State | None]:
        upload = {"delta": torch._foreach_sub(y, x), "m": local["m"], "v": local["v"]}
        return upload, None
