"""APFL (Deng, Kamani & Mahdavi, "Adaptive Personalized Federated Learning", 2020, Algorithm 1):
each client keeps a local model v_i and a mixing weight alpha_i; its personalised model is
v_bar_i = alpha_i v_i + (1 - alpha_i) w, and alpha_i descends its own gradient.

Each local step k on the step's batch (g(p): the batch's gradient at p; w the client's copy y
of the global model, v_bar = alpha v + (1 - alpha) y before the step):

    y     <- y - eta_r * (g(y) + wd * y)                     (FedAvg's step on w)
    g_bar  = g(v_bar)
    v     <- v - eta_r * (alpha * g_bar + wd * v)            (d f(v_bar) / d v = alpha g_bar)
    alpha <- clip(alpha - eta_a,r * <v - y, g_bar>, 0, 1)    (d f(v_bar) / d alpha; adaptive)
    x     <- x + eta_g * Delta_bar                           (server; v_i, alpha_i stay local)

v, y and alpha in the last three lines are their values before the step (the simultaneous
update of Algorithm 1). Readings (docs/personalised.md, "APFL"):
- alpha's step eta_a,r = alpha_lr * eta_r / lr (the run's schedule; alpha_lr null: lr). The
  authors' code adds a small decay to alpha's gradient; the paper's rule has none, nor has
  fedbench.
- `adaptive_alpha: false` keeps every alpha_i at `alpha` (the paper's fixed-alpha runs).
- The personalised model at evaluation mixes v_i with the current global model x.
- v_i starts as the global model of the client's first round; alpha_i starts at `alpha`.

Two gradients per step on its one batch (counted as FedSAM's pair in a private run). alpha 0.5,
adaptive. comm_up d, comm_down d.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import torch
from pydantic import Field
from torch import Tensor

from fedbench.algorithms.base import (
    GradientOracle,
    RoundInfo,
    Scalar,
    State,
    Tensors,
    TensorSeq,
    Upload,
)
from fedbench.algorithms.fedavg import sgd_step_
from fedbench.algorithms.personal import PersonalAlgorithm, PersonalConfig
from fedbench.algorithms.registry import ALGORITHMS
from fedbench.personal.methods.ditto import personal_step_lr
from fedbench.personal.steps import copies, gradient_at


class APFLConfig(PersonalConfig):
    name: str = "apfl"
    lr: float = Field(default=0.1, gt=0)
    weight_decay: float = Field(default=1.0e-3, ge=0)
    alpha: float = Field(
        default=0.5, ge=0, le=1, description="the mixing weight of the local model (its start)"
    )
    adaptive_alpha: bool = Field(
        default=True, description="alpha_i descends its gradient (false: fixed alpha)"
    )
    alpha_lr: float | None = Field(
        default=None, gt=0, description="step size of alpha, on the run's lr schedule (null: lr)"
    )


def mixed(alpha: Tensor, v: TensorSeq, w: TensorSeq, gradient: GradientOracle) -> Tensors:
    """v_bar = alpha v + (1 - alpha) w, per client (alpha: 0-d, or one per stacked row)."""
    scaled_v = gradient.scale(v, alpha)
    scaled_w = gradient.scale(w, 1.0 - alpha)
    torch._foreach_add_(scaled_v, scaled_w)
    return scaled_v


@ALGORITHMS.register("apfl")
class APFL(PersonalAlgorithm):
    """FedAvg on the global model plus a local model mixed in with an adaptive weight."""

    Params = APFLConfig
    paper = "Deng, Kamani & Mahdavi 2020 (arXiv 2003.13461), APFL"
    client_state_desc = "its local model v_i (d floats) and mixing weight alpha_i"
    params: APFLConfig
    gradients_per_step: ClassVar[int] = 2
    supports_privacy = True
    evaluates_other_weights: ClassVar[bool] = True

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        if client_state is None:
            alpha = torch.tensor(self.params.alpha, dtype=x[0].dtype, device=x[0].device)
            return {"v": copies(x), "alpha": alpha}
        return {"v": copies(client_state["v"]), "alpha": client_state["alpha"].clone()}

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        sgd_step_(y, g, lr=info.lr, weight_decay=self.params.weight_decay)

    def local_step_with_oracle(
        self,
        y: Tensors,
        gradient: GradientOracle,
        local: State,
        k: Scalar,
        info: RoundInfo,
    ) -> None:
        p = self.params
        v, alpha = local["v"], local["alpha"]
        g = gradient()
        with torch.no_grad():
            v_bar = mixed(alpha, v, y, gradient)
            # <v - w, g_bar> needs v and w before their steps
            w_before = copies(y) if p.adaptive_alpha else []
            self.local_step(y, g, local, k, info)
        g_bar = gradient_at(y, v_bar, gradient)
        with torch.no_grad():
            # both steps use the alpha of v_bar, before alpha's own step
            step = gradient.scale(g_bar, alpha)
            if p.adaptive_alpha:
                alpha_grad = gradient.dot(torch._foreach_sub(v, w_before), g_bar)
                alpha_lr = personal_step_lr(p.alpha_lr, p.lr, info.lr)
                # in place: the new alpha lives in the state the executor reads back
                alpha.copy_(torch.clamp(alpha - alpha_lr * alpha_grad, 0.0, 1.0))
            sgd_step_(v, step, lr=info.lr, weight_decay=p.weight_decay)

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        state = {"v": copies(local["v"]), "alpha": local["alpha"].detach().clone()}
        return {"delta": torch._foreach_sub(y, x)}, state

    def load_client(self, y: TensorSeq, buffers: Sequence[Tensor], stored: State | None) -> None:
        """The client trains the global model from x: nothing personal is loaded into y."""

    def load_personalised(
        self, y: TensorSeq, buffers: Sequence[Tensor], stored: State | None
    ) -> None:
        """v_bar_i = alpha_i v_i + (1 - alpha_i) x, y holding x (x for a new client)."""
        if stored is None:
            return
        alpha = stored["alpha"]
        torch._foreach_mul_(y, 1.0 - alpha)
        torch._foreach_add_(y, torch._foreach_mul(stored["v"], alpha))
