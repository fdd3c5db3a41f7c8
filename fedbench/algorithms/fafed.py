"""FAFED (Wu, Huang, Hu, Huang, AAAI 2023, "Faster Adaptive Federated Learning"): clients run
STORM momentum (momentum-based variance reduction) preconditioned by an adaptive matrix that is
shared by all clients and held fixed between communications; x, m and v are averaged at every
communication. A baseline of the FedAdamom paper; DP-FAFED (Table 9 of DP-FedAdamW) is dp_fafed.

The order of a public FAFED implementation (FAFED.py, its `FAFED(train_set, test_set, model,
args, device)` training function, one process per worker, all-reduce at each communication): a step first
computes m at the current point, then moves with it.

Round 0 is FAFED's initial exchange: each sampled client computes g(x_0) on one batch, uploads
m_i = g_i and v_i = g_i^2 and takes one plain SGD step y = x_0 - eta_0 * g_i (its remaining local
steps compute nothing). Server: m_bar, v_bar = means, x_1 = x_0 + eta_g * Delta_bar (with
eta_g = 1: x_0 - eta_0 * m_bar), x_prev = x_0.

Round r >= 1: a sampled client starts from y = x, m = m_bar, v = v_bar, y_prev = x_prev and fixes
H = sqrt(v_bar) + rho. Local step k (both gradients on the step's batch b_k):
    m <- g(y; b_k) + (1 - a) * (m - g(y_prev; b_k))          (STORM)
    v <- beta2 * v + (1 - beta2) * g(y; b_k)^2
    y_prev <- y;  y <- y - eta_r * m / H
g includes coupled weight decay (g + lambda * y at its own point). Upload Delta_i, m_i (the m of
the last step), v_i. Server: x <- x + eta_g * Delta_bar, m_bar, v_bar <- means, and
x_prev <- x + eta_g * eta_r * m_bar / H: the mean of the clients' points before their last step
(y_K = y_{K-1} - eta_r * m / H with the same H on every client), so the next round's first step
recomputes m at the averaged point against it.

Where this differs from the code: there every worker keeps its own previous point, so the first
step after a communication takes g(y_prev) at the worker's own pre-step point; fedbench's clients
keep nothing between rounds (partial participation: a client may not have been sampled for many
rounds) and use the averaged one, which is the code's rule exactly when one client trains.

Partial participation (FAFED is analysed with full participation): a sampled client starts from
the latest averages, the state every client has after a communication under full participation.

Choices where the paper's text available to fedbench is silent (documented in docs/algorithms.md):
a 0.1 (STORM weight of the fresh gradient), beta2 0.999, rho 0.1, client lr 0.01. H is fixed
for a whole round from v_bar, so a coordinate whose v is still ~0 takes steps lr * m / rho: with
rho 1e-3 a CNN on digits diverged in its first round (test loss ~1900), with rho 0.1 it trains.
Two gradients per local step on its one batch (DP accounting: one release of a pair per step;
round 0: one release of one gradient, `round_gradients`).
comm_up 3d (Delta, m, v), comm_down 4d (x, m_bar, v_bar, x_prev).
"""

from __future__ import annotations

from typing import ClassVar

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
    TensorSeq,
    Upload,
    add_coupled_decay_,
    add_scaled_,
    addcdiv_scaled_,
)
from fedbench.algorithms.fedavg import FedAvgConfig
from fedbench.algorithms.hyperparams import AlgorithmConfig
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
    #: Round 0 is the initial exchange: one gradient, at the first local step.
    initial_rounds: ClassVar[int] = 1
    #: Its uploaded v builds the shared adaptive matrix sqrt(v) + rho.
    nonnegative_uploads = frozenset({"v"})

    @classmethod
    def upload_size(cls, params: AlgorithmConfig) -> Floats:
        return Floats(d=3)  # Delta_i, m_i, v_i

    @classmethod
    def download_size(cls, params: AlgorithmConfig) -> Floats:
        return Floats(d=4)  # x, m_bar, v_bar, x_prev

    def init_server_state(self, x: Tensors) -> State:
        # m, v and x_prev appear after round 0, FAFED's initial exchange.
        return {}

    def _h(self, v: Tensors) -> TensorSeq:
        h = torch._foreach_sqrt(v)
        torch._foreach_add_(h, self.params.rho)
        return h

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        eta_g = self.params.server_lr
        x_prev: TensorSeq
        if "m" in server:
            # The clients' mean point before their last step: x_new + eta_g * eta_r * m_bar / H,
            # with the H of this round (from the v_bar it started with).
            x_prev = torch._foreach_add(x, mean["delta"], alpha=eta_g)
            addcdiv_scaled_(x_prev, mean["m"], self._h(server["v"]), eta_g * info.lr)
        else:  # round 0: every client stepped from x_0
            x_prev = [t.detach().clone() for t in x]
        torch._foreach_add_(x, mean["delta"], alpha=eta_g)
        server["m"] = [t.clone() for t in mean["m"]]
        server["v"] = [t.clone() for t in mean["v"]]
        server["x_prev"] = x_prev

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        if "m" not in server:
            return {"m": None, "v": None, "h": None, "y_prev": None}
        return {
            "m": [t.clone() for t in server["m"]],
            "v": [t.clone() for t in server["v"]],
            "h": self._h(server["v"]),
            "y_prev": [t.clone() for t in server["x_prev"]],
        }

    def _gradient_at(self, y: Tensors, gradient: GradientOracle) -> Tensors:
        """g(y) + lambda * y: the gradient of the (coupled-decay) loss at the current y."""
        g = [t.detach().clone() for t in gradient()]
        with torch.no_grad():
            add_coupled_decay_(g, y, self.params.weight_decay)
        return g

    def local_step_with_oracle(
        self,
        y: Tensors,
        gradient: GradientOracle,
        local: State,
        k: Scalar,
        info: RoundInfo,
    ) -> None:
        """One FAFED step; the engine calls this with a function computing g at y on the step's
        batch (twice: at the current and at the previous point)."""
        p = self.params
        if local["y_prev"] is None:  # round 0: FAFED's initial exchange, one plain SGD step
            if k == 1:
                g = self._gradient_at(y, gradient)
                with torch.no_grad():
                    local["m"], local["v"] = g, torch._foreach_mul(g, g)
                    add_scaled_(y, g, -info.lr)
            return
        g_new = self._gradient_at(y, gradient)
        with torch.no_grad():
            y_now = [t.detach().clone() for t in y]
            torch._foreach_copy_(y, local["y_prev"])
        g_old = self._gradient_at(y, gradient)
        with torch.no_grad():
            torch._foreach_copy_(y, y_now)
            # m <- g_new + (1 - a) * (m - g_old)
            torch._foreach_sub_(local["m"], g_old)
            torch._foreach_mul_(local["m"], 1.0 - p.alpha)
            torch._foreach_add_(local["m"], g_new)
            torch._foreach_mul_(local["v"], p.beta2)
            torch._foreach_addcmul_(local["v"], g_new, g_new, value=1.0 - p.beta2)
            local["y_prev"] = y_now
            addcdiv_scaled_(y, local["m"], local["h"], -info.lr)

    @classmethod
    def round_gradients(
        cls, round_index: int, local_steps: int, params: AlgorithmConfig | None = None
    ) -> dict[int, int]:
        """Round 0 (the initial exchange): one gradient at step 1, none at the other steps;
        later rounds: two gradients (the new and the previous point) at every step."""
        if round_index < cls.initial_rounds:
            return {1: min(1, local_steps), 0: max(local_steps - 1, 0)}
        return super().round_gradients(round_index, local_steps, params)

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        raise TypeError(
            "fafed needs the gradient at two points per step: call local_step_with_oracle"
        )

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        upload = {"delta": torch._foreach_sub(y, x), "m": local["m"], "v": local["v"]}
        return upload, None
