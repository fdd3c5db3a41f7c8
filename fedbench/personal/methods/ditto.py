"""Ditto (Li, Hu, Beirami & Smith, "Ditto: Fair and Robust Federated Learning Through
Personalization", ICML 2021, Algorithm 1): FedAvg on the global model w, and on each client a
personal model v_i solving min_v F_i(v) + (lambda/2)||v - w^r||^2, kept on the client.

Each local step k on the step's batch (g(p): the gradient of that batch's loss at p):

    y   <- y   - eta_r   * (g(y)   + wd * y)                            (FedAvg's step on w)
    v_i <- v_i - eta_p,r * (g(v_i) + wd * v_i + lambda * (v_i - x^r))   (the personal step)
    x   <- x + eta_g * Delta_bar                                        (server; v_i stays local)

Readings (docs/personalised.md, "Ditto"):
- lambda is constant over the rounds (Algorithm 1's fixed lambda; the paper's per-client
  selection of lambda from a candidate set on validation data is a tuning procedure around
  the rule, not part of it).
- The personal model takes one step per local step, on the same batch as the global step: K
  personal steps per round (the paper's s local iterations at s = K, the setting of its
  experiments, where both solvers run the same local epochs). The proximal anchor is the
  round's received global model x^r, as in Algorithm 1 (not the client's drifting local w).
- eta_p,r = personal_lr * eta_r / lr: the personal steps follow the run's lr schedule;
  personal_lr null is the local lr itself.
- v_i starts as the global model of the client's first round (Algorithm 1 initialises every
  v_k to w^0; a client first sampled in round r > 0 starts from x^r, which keeps no state for
  clients that never train).

Two gradients per step on its one batch: a private run privatises both and the accountant
counts one release of the pair per step (as FedSAM's). lambda 0.1. comm_up d, comm_down d.
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
    add_scaled_,
)
from fedbench.algorithms.fedavg import sgd_step_
from fedbench.algorithms.personal import PersonalAlgorithm, PersonalConfig
from fedbench.algorithms.registry import ALGORITHMS
from fedbench.personal.steps import copies, gradient_at


class DittoConfig(PersonalConfig):
    name: str = "ditto"
    lr: float = Field(default=0.1, gt=0)
    weight_decay: float = Field(default=1.0e-3, ge=0)
    lam: float = Field(
        default=0.1,
        ge=0,
        description="lambda of the proximal term pulling the personal model toward x^r",
    )
    personal_lr: float | None = Field(
        default=None,
        gt=0,
        description="lr of the personal steps, on the run's lr schedule (null: lr)",
    )


def personal_step_lr(personal_lr: float | None, lr: float, step_lr: Scalar) -> Scalar:
    """eta_p at this step: the local step's eta_{r,k} rescaled by personal_lr / lr."""
    return step_lr if personal_lr is None else step_lr * (personal_lr / lr)


def ditto_personal_step_(
    v: TensorSeq, g: Tensors, anchor: TensorSeq, *, lr: Scalar, lam: float, weight_decay: float
) -> None:
    """v <- v - lr * (g + weight_decay * v + lam * (v - anchor)), in place; g is overwritten."""
    if weight_decay:
        torch._foreach_add_(g, v, alpha=weight_decay)
    if lam:
        torch._foreach_add_(g, torch._foreach_sub(v, anchor), alpha=lam)
    add_scaled_(v, g, -lr)


@ALGORITHMS.register("ditto")
class Ditto(PersonalAlgorithm):
    """FedAvg on the global model plus a proximally regularised personal model per client."""

    Params = DittoConfig
    paper = "Li, Hu, Beirami & Smith 2021 (ICML), Ditto"
    client_state_desc = "its personal model v_i (d floats)"
    params: DittoConfig
    gradients_per_step: ClassVar[int] = 2
    #: Sample-level DP privatises the personal gradients too (docs/personalised.md, "DP").
    supports_privacy = True
    #: Its second gradient is taken at v_i, in train mode on the resident model: with BatchNorm
    #: running statistics v_i's batches would move the global model's statistics.
    evaluates_other_weights: ClassVar[bool] = True

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        # x stays unchanged until the server step: the anchor needs no copy; v_i is the
        # client's own (a copy, so that the stored state is only replaced at client_end).
        start = x if client_state is None else client_state["v"]
        return {"x": x, "v": copies(start)}

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
        g = gradient()
        with torch.no_grad():
            self.local_step(y, g, local, k, info)
        g_personal = gradient_at(y, local["v"], gradient)
        with torch.no_grad():
            ditto_personal_step_(
                local["v"],
                g_personal,
                local["x"],
                lr=personal_step_lr(p.personal_lr, p.lr, info.lr),
                lam=p.lam,
                weight_decay=p.weight_decay,
            )

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        return {"delta": torch._foreach_sub(y, x)}, {"v": copies(local["v"])}

    def load_client(self, y: TensorSeq, buffers: Sequence[Tensor], stored: State | None) -> None:
        """The client trains the global model from x: nothing personal is loaded into y."""

    def load_personalised(
        self, y: TensorSeq, buffers: Sequence[Tensor], stored: State | None
    ) -> None:
        """Client i is tested with v_i (x for a client that never trained)."""
        if stored is not None:
            torch._foreach_copy_(y, stored["v"])
