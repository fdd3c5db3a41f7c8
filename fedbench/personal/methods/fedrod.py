"""FedRoD (Chen & Chao, "On Bridging Generic and Personalized Federated Learning for Image
Classification", ICLR 2022; Fed-RoD's linear variant): a shared body phi and a generic head
(W, b) trained with the balanced softmax and aggregated, and a personal head (P, q) per client,
trained on the body's features, kept on the client and added to the generic head's logits.

With z = phi(xi), client i's class counts n_i,c (its training data) and one local step on the
step's batch (all gradients at the values before the step: both heads learn from one forward,
as the paper's two losses summed):

    g  = grad_(phi, W, b) CE(W z + b + log n_i, t)        (balanced softmax: the generic loss)
    h  = grad_(P, q) CE((W z + b) + (P sg(z) + q), t)     (personal loss; sg: no gradient into
                                                           phi or the generic head)
    (phi, W, b) <- (phi, W, b) - eta_r (g + wd (phi, W, b))   (FedAvg's step; aggregated)
    (P, q)      <- (P, q) - eta_r (h + wd (P, q))              (stays on the client)

and client i's personalised model predicts with (W + P) z + (b + q): two linear heads' logits
summed are the logits of the summed head, so `load_personalised` writes that one model.

Both gradients are the engine's ordinary gradient (the one objective, fedbench.step.objective)
taken at another point, like every personal-model method here (fedbench.personal.steps): the
balanced softmax adds log n_i to the logits, which is the plain cross-entropy with the head's
bias shifted by log n_i; h is the head part of the plain cross-entropy's gradient at the summed
head (W + P, b + q), since d logits / d(P, q) = d logits / d(W + P, b + q). So the rule needs no
loss of its own and is clipped, privatised and counted like any gradient, on both executors.

Readings (docs/personalised.md, "FedRoD"):
- the counts n_i,c are those of client i's training split, fixed when the run is prepared and
  handed to the rule in the client's first stored state (`new_client_state`); a class the
  client lacks counts `ABSENT_COUNT` (log -18.4, not -inf: the loss stays finite under label
  smoothing and in padded batches; its probability is below 1e-8 of a present class's);
- the personal head starts at zero (a new client's personalised model is the generic one);
- `detach_body: false` lets the personal loss train phi as well (its body gradient added to g);
- the hypernetwork variant (FedRoD with a hypernetwork producing the personal head) and the
  paper's other robust losses are not implemented; the head must be one linear layer.

Two gradients per step on its one batch. comm_up d, comm_down d (body and generic head).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np
import torch
from pydantic import Field
from torch import Tensor

from fedbench.algorithms.base import (
    GradientOracle,
    ParamSpec,
    RoundInfo,
    Scalar,
    State,
    Tensors,
    TensorSeq,
    Upload,
)
from fedbench.algorithms.fedavg import sgd_step_
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.personal import PersonalAlgorithm, PersonalConfig
from fedbench.algorithms.registry import ALGORITHMS
from fedbench.errors import FedbenchError
from fedbench.personal.steps import copies

#: The count a class absent from a client's data is given in log n_i,c (module docstring).
ABSENT_COUNT = 1.0e-8


class FedRoDConfig(PersonalConfig):
    name: str = "fedrod"
    lr: float = Field(default=0.1, gt=0)
    weight_decay: float = Field(default=1.0e-3, ge=0)
    detach_body: bool = Field(
        default=True,
        description="the personal head trains on detached features (the paper's default); "
        "false: its loss's gradient trains the body too",
    )


def log_counts(counts: np.ndarray | Sequence[int]) -> np.ndarray:
    """log n_c of one client's class counts, absent classes counted as `ABSENT_COUNT`."""
    n = np.asarray(counts, dtype=np.float64)
    return np.log(np.where(n > 0, n, ABSENT_COUNT))


@ALGORITHMS.register("fedrod")
class FedRoD(PersonalAlgorithm):
    """A generic model trained with the balanced softmax plus a personal linear head."""

    Params = FedRoDConfig
    paper = "Chen & Chao 2022 (ICLR), FedRoD (linear personal head)"
    client_state_desc = "its personal head (P_i, q_i) and log class counts (C h + 2 C)"
    params: FedRoDConfig
    uses_head: ClassVar[bool] = True
    uses_class_counts: ClassVar[bool] = True
    gradients_per_step: ClassVar[int] = 2

    def __init__(self, params: AlgorithmConfig, spec: ParamSpec, *, num_clients: int) -> None:
        super().__init__(params, spec, num_clients=num_clients)
        head = [j for j, name in enumerate(spec.names) if name in spec.head_params]
        shapes = [tuple(spec.shapes[j]) for j in head]
        if len(head) != 2 or len(shapes[0]) != 2 or shapes[1] != (shapes[0][0],):
            raise FedbenchError(
                f"{params.name} sums a personal head onto the generic one, which needs the "
                f"head to be one linear layer with a bias (this model's: {shapes}); use cnn, "
                "mlp, logreg, resnet18, vit_tiny or a LEAF model"
            )
        #: Positions of the head's weight W (C x h) and bias b (C) in the spec's order.
        self.weight_index, self.bias_index = head
        self.class_counts: np.ndarray | None = None

    def set_class_counts(self, counts: np.ndarray) -> None:
        """Every client's training class counts (N x C), from the partition."""
        self.class_counts = counts

    def stored_floats(self) -> int:
        c, h = self.spec.shapes[self.weight_index]
        return int(c) * int(h) + 2 * int(c)

    def new_client_state(self, client: int, x: Tensors) -> State | None:
        """A first visit: the client's log counts and a zero personal head."""
        if self.class_counts is None:
            return None
        weight, bias = x[self.weight_index], x[self.bias_index]
        offset = torch.as_tensor(log_counts(self.class_counts[client]), dtype=bias.dtype)
        return {
            "log_counts": offset.to(bias.device),
            "head": [torch.zeros_like(weight), torch.zeros_like(bias)],
        }

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        # None only where nothing seeded the state (the engine's probe of a step): counts all
        # equal, which shifts every logit alike and leaves the softmax plain.
        if client_state is None:
            client_state = {
                "log_counts": torch.zeros_like(x[self.bias_index]),
                "head": [
                    torch.zeros_like(x[self.weight_index]),
                    torch.zeros_like(x[self.bias_index]),
                ],
            }
        return {
            "log_counts": client_state["log_counts"].clone(),
            "head": copies(client_state["head"]),
        }

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
        w, b = self.weight_index, self.bias_index
        personal = local["head"]
        # Each gradient is used before the next call (an executor may reuse its buffers); both
        # are taken at the values before the step.
        with torch.no_grad():
            saved = [y[w].clone(), y[b].clone()]
            torch._foreach_add_([y[w], y[b]], personal)  # the summed head
        h = gradient()
        with torch.no_grad():
            torch._foreach_copy_([y[w], y[b]], saved)
            body = [j for j in range(len(y)) if j not in (w, b)]
            shared = [] if self.params.detach_body else [h[j].clone() for j in body]
            sgd_step_(personal, [h[w], h[b]], lr=info.lr, weight_decay=self.params.weight_decay)
            y[b].add_(local["log_counts"])  # the balanced softmax's logits
        g = gradient()
        with torch.no_grad():
            y[b].copy_(saved[1])
            if shared:
                torch._foreach_add_([g[j] for j in body], shared)
            self.local_step(y, g, local, k, info)

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        state = {"log_counts": local["log_counts"].clone(), "head": copies(local["head"])}
        return {"delta": torch._foreach_sub(y, x)}, state

    def load_client(self, y: TensorSeq, buffers: Sequence[Tensor], stored: State | None) -> None:
        """The client trains the generic model from x: nothing personal is loaded into y."""

    def load_personalised(
        self, y: TensorSeq, buffers: Sequence[Tensor], stored: State | None
    ) -> None:
        """The summed head (W + P_i, b + q_i) over x (x alone for a client that never trained)."""
        if stored is not None:
            torch._foreach_add_([y[self.weight_index], y[self.bias_index]], stored["head"])

    def finetune_names(self) -> frozenset[str]:
        """Fine-tuning the summed head with the plain loss is the personal head's own step."""
        return self.spec.head_params
