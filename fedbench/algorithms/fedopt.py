"""FedAdam, FedYogi, FedAdagrad (Reddi et al., ICLR 2021, "Adaptive Federated Optimization",
Algorithm 2): FedAvg's clients, an adaptive optimizer on the server fed with Delta_bar.

Server m = 0, v = tau^2 (elementwise):
    m <- beta1 * m + (1 - beta1) * Delta_bar
    adam:    v <- beta2 * v + (1 - beta2) * Delta_bar^2
    yogi:    v <- v - (1 - beta2) * Delta_bar^2 * sign(v - Delta_bar^2)
    adagrad: v <- v + Delta_bar^2
    x <- x + eta_g * m / (sqrt(v) + tau)
`bias_correction: true` divides m by (1 - beta1^(r+1)) and, for adam and yogi, v by
(1 - beta2^(r+1)) (as Flower does; adagrad's v is a sum and is not corrected).
Defaults: server_lr (eta_g) 0.01 as in the FedAdamW paper configs, beta1 0.9, beta2 0.99,
tau 1e-3; clients lr 0.1, weight decay 1e-3 (local SGD). comm_up d, comm_down d.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from pydantic import Field

from fedbench.algorithms.adam import adam_step_
from fedbench.algorithms.base import Algorithm, RoundInfo, Scalar, State, Tensors, zeros_like
from fedbench.algorithms.fedavg import FedAvgConfig, sgd_step_
from fedbench.algorithms.registry import ALGORITHMS


class FedAdagradConfig(FedAvgConfig):
    name: str = "fedadagrad"
    server_lr: float = Field(default=0.01, gt=0)
    beta1: float = Field(default=0.9, ge=0, lt=1, description="server first-moment decay")
    tau: float = Field(
        default=1.0e-3, gt=0, description="server adaptivity: v starts at tau^2; sqrt(v) + tau"
    )
    bias_correction: bool = Field(
        default=False, description="divide the server moments by 1 - beta^(r+1) (as Flower)"
    )


class FedAdamConfig(FedAdagradConfig):
    name: str = "fedadam"
    beta2: float = Field(default=0.99, ge=0, lt=1, description="server second-moment decay")


class FedYogiConfig(FedAdamConfig):
    name: str = "fedyogi"


class FedOpt(Algorithm):
    """Local SGD; server adaptive step on the pseudo-gradient Delta_bar (variant sets the v rule)."""

    variant: ClassVar[str] = "adam"
    paper = "Reddi et al. 2021 (ICLR), Algorithm 2"
    params: FedAdagradConfig

    def init_server_state(self, x: Tensors) -> State:
        tau2 = self.params.tau**2
        return {"m": zeros_like(x), "v": [torch.full_like(t, tau2) for t in x]}

    def _update_v(self, v: Tensors, delta: Tensors) -> None:
        sq = torch._foreach_mul(delta, delta)
        if self.variant == "adagrad":
            torch._foreach_add_(v, sq)
            return
        beta2 = self.params.beta2  # type: ignore[attr-defined]
        if self.variant == "adam":
            torch._foreach_mul_(v, beta2)
            torch._foreach_add_(v, sq, alpha=1.0 - beta2)
        else:  # yogi
            signs = [torch.sign(a - b) for a, b in zip(v, sq, strict=True)]
            torch._foreach_mul_(sq, signs)
            torch._foreach_add_(v, sq, alpha=-(1.0 - beta2))

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        p = self.params
        delta = mean["delta"]
        torch._foreach_lerp_(server["m"], delta, 1.0 - p.beta1)
        self._update_v(server["v"], delta)
        bc1 = bc2 = 1.0
        if p.bias_correction:
            bc1 = 1.0 - p.beta1 ** (info.round + 1)
            if self.variant != "adagrad":
                bc2 = 1.0 - p.beta2 ** (info.round + 1)  # type: ignore[attr-defined]
        # Delta_bar points downhill already: the server's Adam step adds it (lr = -eta_g).
        adam_step_(
            x,
            server["m"],
            server["v"],
            lr=-p.server_lr,
            bias_correction1=bc1,
            bias_correction2=bc2,
            eps=p.tau,
        )

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        sgd_step_(y, g, lr=info.lr, weight_decay=self.params.weight_decay)


@ALGORITHMS.register("fedadam")
class FedAdam(FedOpt):
    Params = FedAdamConfig
    capturable_step = True
    variant = "adam"


@ALGORITHMS.register("fedyogi")
class FedYogi(FedOpt):
    Params = FedYogiConfig
    variant = "yogi"


@ALGORITHMS.register("fedadagrad")
class FedAdagrad(FedOpt):
    Params = FedAdagradConfig
    variant = "adagrad"
