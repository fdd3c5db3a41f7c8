"""Per-FedAvg (Fallah, Mokhtari & Ozdaglar, "Personalized Federated Learning with Theoretical
Guarantees: A Model-Agnostic Meta-Learning Approach", NeurIPS 2020, Algorithm 1): FedAvg on
the MAML objective F_i(w) = f_i(w - alpha grad f_i(w)), personalised at evaluation by one step
of SGD on the client's own data.

One meta-update takes two local steps, each on its own batch (D_k, then D_k+1), as Algorithm 1
draws independent batches for the inner and the outer gradient:

    step k odd:   y0 <- y;  y <- y0 - alpha * g(y0; D_k)                     (adapted point)
    step k even:  u = g(y; D_k+1)  at the adapted point y
                  FO: y <- y0 - beta_r * u
                  HF: y <- y0 - beta_r * (u - alpha * h),                    (Hessian-free)
                      h = (g(y0 + delta u; D_k+1) - g(y0 - delta u; D_k+1)) / (2 delta)
    x <- x + eta_g * Delta_bar                                               (server)

beta_r is the run's scheduled lr, alpha the constant `inner_lr`, g includes the coupled weight
decay (g(p) + wd * p, so h is the Hessian-vector product of the regularised loss).

Readings (docs/personalised.md, "Per-FedAvg"):
- HF takes its Hessian-vector product by the paper's finite difference of two gradients (its
  Section 5, with delta `hf_delta`), not by double backward: every executor's gradient oracle
  returns gradients, and a difference of two clipped (or privatised) gradients is accounted as
  every other gradient. The paper draws a third batch D'' for it; fedbench uses the outer
  step's batch D_k+1, so that every step keeps one batch (the engine draws one per step).
- An odd K leaves its last inner step without its outer step: the client uploads y0 - x, the
  last completed meta-update (that step's gradient is still taken and counted).
- Evaluation personalises by one SGD step of size alpha on one batch of the client's training
  data (the paper's evaluation), from the current global model.

FO: one gradient per step. HF: one on the odd steps, three on the even ones (round_gradients).
inner_lr 0.01 (alpha), hf_delta 1e-3. comm_up d, comm_down d.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from pydantic import Field

from fedbench.algorithms.base import (
    GradientOracle,
    RoundInfo,
    Scalar,
    State,
    Tensors,
    TensorSeq,
    Upload,
    add_coupled_decay_,
    add_scaled_,
)
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.personal import PersonalAlgorithm, PersonalConfig
from fedbench.algorithms.registry import ALGORITHMS
from fedbench.personal.steps import copies, gradient_at


class PerFedAvgConfig(PersonalConfig):
    name: str = "perfedavg"
    lr: float = Field(default=0.1, gt=0)
    weight_decay: float = Field(default=1.0e-3, ge=0)
    inner_lr: float = Field(
        default=0.01, gt=0, description="alpha: the inner (adaptation) step, also at evaluation"
    )
    finetune_steps: int = Field(
        default=1,
        ge=0,
        description="SGD steps of the evaluation's personalisation (the paper's: one)",
    )


class PerFedAvgHFConfig(PerFedAvgConfig):
    name: str = "perfedavg_hf"
    hf_delta: float = Field(
        default=1.0e-3, gt=0, description="delta of the finite-difference Hessian-vector product"
    )


def hessian_vector(
    y: Tensors, at: TensorSeq, u: TensorSeq, delta: float, gradient: GradientOracle, wd: float
) -> Tensors:
    """(g(at + delta u) - g(at - delta u)) / (2 delta), g with coupled weight decay."""
    plus = list(torch._foreach_add(at, u, alpha=delta))
    minus = list(torch._foreach_add(at, u, alpha=-delta))
    g_plus, g_minus = gradient_at(y, plus, gradient), gradient_at(y, minus, gradient)
    with torch.no_grad():
        add_coupled_decay_(g_plus, plus, wd)
        add_coupled_decay_(g_minus, minus, wd)
        h = list(torch._foreach_sub(g_plus, g_minus))
        torch._foreach_div_(h, 2.0 * delta)
    return h


@ALGORITHMS.register("perfedavg")
class PerFedAvg(PersonalAlgorithm):
    """FedAvg on the MAML objective, first-order (FO) meta-gradient."""

    Params = PerFedAvgConfig
    paper = "Fallah, Mokhtari & Ozdaglar 2020 (NeurIPS), Per-FedAvg (FO)"
    params: PerFedAvgConfig
    supports_privacy = True
    #: Nothing is kept per client: the personalisation is the evaluation's fine-tuning.
    personalises = False

    def finetune_lr(self) -> float:
        """The evaluation's step: alpha, unless finetune_lr is set."""
        lr = self.params.finetune_lr
        return self.params.inner_lr if lr is None else lr

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        # y0: the start of the open meta-update (written at every odd step)
        return {"y0": copies(x)}

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        """The inner step (k odd) or the FO outer step (k even) with g at the current y."""
        wd = self.params.weight_decay
        add_coupled_decay_(g, y, wd)
        if int(k) % 2 == 1:
            torch._foreach_copy_(local["y0"], y)
            add_scaled_(y, g, -self.params.inner_lr)
            return
        torch._foreach_copy_(y, local["y0"])
        add_scaled_(y, self.meta_gradient(y, g, local, None), -info.lr)

    def meta_gradient(
        self, y: Tensors, u: Tensors, local: State, gradient: GradientOracle | None
    ) -> Tensors:
        """The outer step's direction from u = g at the adapted point: u itself (FO)."""
        return u

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        # an odd K ends on an inner step: the last completed meta-update is y0
        end = local["y0"] if info.local_steps % 2 == 1 else y
        return {"delta": torch._foreach_sub(end, x)}, client_state


@ALGORITHMS.register("perfedavg_hf")
class PerFedAvgHF(PerFedAvg):
    """Per-FedAvg with the Hessian-free meta-gradient u - alpha * H(y0) u."""

    Params = PerFedAvgHFConfig
    paper = "Fallah, Mokhtari & Ozdaglar 2020 (NeurIPS), Per-FedAvg (HF)"
    params: PerFedAvgHFConfig
    gradients_per_step: ClassVar[int] = 3

    @classmethod
    def round_gradients(
        cls, round_index: int, local_steps: int, params: AlgorithmConfig | None = None
    ) -> dict[int, int]:
        inner, outer = (local_steps + 1) // 2, local_steps // 2
        return {g: n for g, n in ((1, inner), (3, outer)) if n}

    def local_step_with_oracle(
        self,
        y: Tensors,
        gradient: GradientOracle,
        local: State,
        k: Scalar,
        info: RoundInfo,
    ) -> None:
        if int(k) % 2 == 1:
            super().local_step_with_oracle(y, gradient, local, k, info)
            return
        u = gradient()
        with torch.no_grad():
            add_coupled_decay_(u, y, self.params.weight_decay)
            torch._foreach_copy_(y, local["y0"])
        direction = self.meta_gradient(y, u, local, gradient)
        with torch.no_grad():
            add_scaled_(y, direction, -info.lr)

    def meta_gradient(
        self, y: Tensors, u: Tensors, local: State, gradient: GradientOracle | None
    ) -> Tensors:
        """u - alpha * H(y0) u, y holding y0."""
        assert gradient is not None  # the HF step always passes its oracle
        p = self.params
        h = hessian_vector(y, local["y0"], u, p.hf_delta, gradient, p.weight_decay)
        with torch.no_grad():
            return list(torch._foreach_add(u, h, alpha=-p.inner_lr))
