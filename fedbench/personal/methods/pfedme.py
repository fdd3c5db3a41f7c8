"""pFedMe (T Dinh, Tran & Nguyen, "Personalized Federated Learning with Moreau Envelopes",
NeurIPS 2020, Algorithm 1): each client's personalised model theta_i solves the Moreau-envelope
problem min_theta f_i(theta) + (lambda/2)||theta - w||^2 around its local copy w of the global
model, approximately, and w moves toward theta; the server mixes the clients' w in with beta.

Each local step on the step's batch D (g(p): the batch's gradient at p, plus wd * p):

    repeat inner_steps times:  theta <- theta - personal_lr * (g(theta) + lambda * (theta - y))
    y <- y - eta_r * lambda * (y - theta)                         (the local update of w)
    x <- x + beta * Delta_bar = (1 - beta) x + beta * mean_i y_i^K    (server; beta = server_lr)

theta starts each round at x^r and carries over from step to step within the round (the
authors' code); it is kept after the round as the client's personalised model.

Readings (docs/personalised.md, "pFedMe"):
- The inner problem is solved by `inner_steps` (the paper's K, 5) gradient steps on the one
  batch of the local step (the paper's h_i(theta; w, D)), each a gradient the run clips or
  privatises: a private run counts a release of inner_steps gradients of that batch per step.
- beta is `server_lr` (x + beta * Delta_bar is the paper's (1 - beta) x + beta * mean w).
- The authors' code trains every client every round and aggregates only the sampled ones (to
  evaluate every personalised model); fedbench trains the sampled clients only, and a client
  that never trained is evaluated with the global model.

lambda 15, personal_lr 0.01, inner_steps 5. comm_up d, comm_down d.
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
    add_coupled_decay_,
    add_scaled_,
)
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.personal import PersonalAlgorithm, PersonalConfig
from fedbench.algorithms.registry import ALGORITHMS
from fedbench.personal.steps import copies, gradient_at


class PFedMeConfig(PersonalConfig):
    name: str = "pfedme"
    lr: float = Field(default=0.1, gt=0)
    weight_decay: float = Field(default=1.0e-3, ge=0)
    lam: float = Field(default=15.0, gt=0, description="lambda of the Moreau envelope")
    personal_lr: float = Field(
        default=0.01, gt=0, description="step size of the inner solve for theta"
    )
    inner_steps: int = Field(
        default=5, ge=1, description="gradient steps of the inner solve per local step"
    )


@ALGORITHMS.register("pfedme")
class PFedMe(PersonalAlgorithm):
    """Moreau-envelope personalisation: an inner solve for theta_i, w pulled toward it."""

    Params = PFedMeConfig
    paper = "T Dinh, Tran & Nguyen 2020 (NeurIPS), pFedMe"
    client_state_desc = "its personalised model theta_i (d floats)"
    params: PFedMeConfig
    gradients_per_step: ClassVar[int] = PFedMeConfig().inner_steps
    supports_privacy = True
    evaluates_other_weights: ClassVar[bool] = True

    @classmethod
    def round_gradients(
        cls, round_index: int, local_steps: int, params: AlgorithmConfig | None = None
    ) -> dict[int, int]:
        inner = params.inner_steps if isinstance(params, PFedMeConfig) else cls.gradients_per_step
        return {inner: local_steps}

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        return {"theta": copies(x)}

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        raise TypeError("pfedme takes inner_steps gradients per step: call local_step_with_oracle")

    def local_step_with_oracle(
        self,
        y: Tensors,
        gradient: GradientOracle,
        local: State,
        k: Scalar,
        info: RoundInfo,
    ) -> None:
        p, theta = self.params, local["theta"]
        for _ in range(p.inner_steps):
            g = gradient_at(y, theta, gradient)
            with torch.no_grad():
                add_coupled_decay_(g, theta, p.weight_decay)
                torch._foreach_add_(g, torch._foreach_sub(theta, y), alpha=p.lam)
                add_scaled_(theta, g, -p.personal_lr)
        with torch.no_grad():
            add_scaled_(y, torch._foreach_sub(y, theta), -info.lr * p.lam)

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        return {"delta": torch._foreach_sub(y, x)}, {"theta": copies(local["theta"])}

    def load_client(self, y: TensorSeq, buffers: Sequence[Tensor], stored: State | None) -> None:
        """The client trains its local w from x: nothing personal is loaded into y."""

    def load_personalised(
        self, y: TensorSeq, buffers: Sequence[Tensor], stored: State | None
    ) -> None:
        """theta_i after the client's last round (x for a client that never trained)."""
        if stored is not None:
            torch._foreach_copy_(y, stored["theta"])
