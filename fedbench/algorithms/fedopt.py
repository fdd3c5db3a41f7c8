"""FedAdam, FedYogi, FedAdagrad (Reddi et al., ICLR 2021, "Adaptive Federated Optimization",
Algorithm 2): FedAvg's clients, an adaptive optimizer on the server fed with Delta_bar.

`convention: reddi` (default), Algorithm 2. Server m = 0, v = tau^2 (elementwise):
    m <- beta1 * m + (1 - beta1) * Delta_bar
    adam:    v <- beta2 * v + (1 - beta2) * Delta_bar^2
    yogi:    v <- v - (1 - beta2) * Delta_bar^2 * sign(v - Delta_bar^2)
    adagrad: v <- v + Delta_bar^2
    x <- x + eta_g * m / (sqrt(v) + tau)
`bias_correction: true` (fedbench's option, in neither Algorithm 2 nor Flower) divides m by
(1 - beta1^(r+1)) and, for adam and yogi, v by (1 - beta2^(r+1)), r the 0-based round, inside
the root: x <- x + eta_g * m_hat / (sqrt(v_hat) + tau), as torch.optim.Adam places eps.

`convention: flower` is the rule of Flower's FedAdam / FedYogi / FedAdagrad strategies (flwr,
both its strategy APIs; docs/flower.md): the same m and v updates but v starts at 0, and
    adam:          x <- x + eta_g * sqrt(1 - beta2^(t+1)) / (1 - beta1^(t+1)) * m / (sqrt(v) + tau)
    yogi, adagrad: x <- x + eta_g * m / (sqrt(v) + tau)
with t = r + 1 Flower's 1-based server round: FedAdam always scales its step (Kingma & Ba's
alpha_t with exponent t+1, tau unscaled), FedYogi and FedAdagrad never do, and Flower's
FedAdagrad has no first moment (beta_1 = 0), so `beta1: 0` is required there.

Defaults: server_lr (eta_g) 0.01 as in the FedAdamW paper configs, beta1 0.9, beta2 0.99,
tau 1e-3; clients lr 0.1, weight decay 1e-3 (local SGD). comm_up d, comm_down d.
"""

from __future__ import annotations

import math
from typing import ClassVar, Literal

import torch
from pydantic import Field, model_validator

from fedbench.algorithms.adam import adam_step_
from fedbench.algorithms.base import Algorithm, RoundInfo, Scalar, State, Tensors, zeros_like
from fedbench.algorithms.fedavg import FedAvgConfig, sgd_step_
from fedbench.algorithms.registry import ALGORITHMS


class FedAdagradConfig(FedAvgConfig):
    name: str = "fedadagrad"
    server_lr: float = Field(default=0.01, gt=0)
    beta1: float = Field(default=0.9, ge=0, lt=1, description="server first-moment decay")
    tau: float = Field(
        default=1.0e-3,
        gt=0,
        description="server adaptivity: sqrt(v) + tau; with convention reddi v starts at tau^2",
    )
    bias_correction: bool = Field(
        default=False,
        description="reddi only: divide m (and Adam's / Yogi's v) by 1 - beta^(r+1), r the "
        "0-based round (fedbench's option; neither Reddi et al. nor Flower)",
    )
    convention: Literal["reddi", "flower"] = Field(
        default="reddi",
        description="reddi: Reddi et al. Algorithm 2 (v starts at tau^2); flower: Flower's "
        "strategies (v starts at 0; FedAdam scales eta_g by sqrt(1 - beta2^(t+1)) / "
        "(1 - beta1^(t+1)), t the 1-based round, tau unscaled; FedYogi, FedAdagrad unscaled)",
    )

    @model_validator(mode="after")
    def _flower_has_its_own_rule(self) -> FedAdagradConfig:
        if self.convention == "flower" and self.bias_correction:
            raise ValueError(
                "convention flower has Flower's own step scaling (FedAdam) or none (FedYogi, "
                "FedAdagrad): set bias_correction false"
            )
        adagrad = self.name.removeprefix("dp_") == "fedadagrad"
        if self.convention == "flower" and adagrad and self.beta1 != 0:
            raise ValueError(
                "Flower's FedAdagrad has no first moment (beta_1 = 0): set "
                "algorithm.beta1 0 with convention flower"
            )
        return self


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
        # Algorithm 2 starts v at tau^2; Flower starts it at 0.
        v0 = 0.0 if self.params.convention == "flower" else self.params.tau**2
        return {"m": zeros_like(x), "v": [torch.full_like(t, v0) for t in x]}

    def _beta2(self) -> float:
        """beta2 of the adam and yogi variants (FedAdagrad's v is a plain sum: it has none)."""
        if not isinstance(self.params, FedAdamConfig):
            raise TypeError(f"{type(self).__name__} ({self.variant}) keeps no beta2")
        return self.params.beta2

    def _update_v(self, v: Tensors, delta: Tensors) -> None:
        sq = torch._foreach_mul(delta, delta)
        if self.variant == "adagrad":
            torch._foreach_add_(v, sq)
            return
        beta2 = self._beta2()
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
        lr, bc1, bc2 = p.server_lr, 1.0, 1.0
        if p.convention == "flower":
            if self.variant == "adam":
                # Flower's eta_norm: the exponent is its 1-based round + 1 = r + 2, and the
                # whole factor scales the step, so tau stays outside it (unscaled).
                t = info.round_index + 1
                beta2 = self._beta2()
                lr = p.server_lr * math.sqrt(1.0 - beta2 ** (t + 1)) / (1.0 - p.beta1 ** (t + 1))
        elif p.bias_correction:
            bc1 = 1.0 - p.beta1 ** (info.round_index + 1)
            if self.variant != "adagrad":
                bc2 = 1.0 - self._beta2() ** (info.round_index + 1)
        # Delta_bar points downhill already: the server's Adam step adds it (lr = -eta_g).
        adam_step_(
            x,
            server["m"],
            server["v"],
            lr=-lr,
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
