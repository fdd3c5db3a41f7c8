"""FedRep (Collins, Hassani, Mokhtari & Shakkottai, "Exploiting Shared Representations for
Personalized Federated Learning", ICML 2021, Algorithm 1): a shared representation (the body B),
a personal head H trained first, then the body with the new head fixed.

    y_i <- (x_B, h_i)                                      (h_i: stored; x_H on a first visit)
    K_h = floor(K * head_epochs / (head_epochs + body_epochs))
    k = 1..K_h:      y_H <- y_H - eta_r (g_H + lambda y_H)  (body fixed)
    k = K_h+1..K:    y_B <- y_B - eta_r (g_B + lambda y_B)  (head fixed)
    h_i <- y_H ;  Delta_i = (y_B - x_B, 0)
    x_B <- x_B + eta_g * mean_i Delta_i,B                   (server; x_H stays at its init)

The paper's experiments train the head for 10 epochs and the body for 1 per round; fedbench
has one step budget K per round (`fl.local_steps`) and splits it in that ratio, so that with K a
multiple of a client's steps per epoch the split is exactly the paper's epochs. A frozen block
does not move at all (no weight decay either): Algorithm 1's step is a gradient step on the
trained block only. Public code differs: FL-bench's client file has trained head epochs plus
extra body epochs in some versions and a fixed total with the body's last in others, and froze
a block by zeroing its gradient before an optimiser step that still applied weight decay to it.
`order: body_first` runs the body's steps first, for comparison with code that does.

Evaluation fine-tuning (and an unseen client): `finetune_steps` SGD steps on the head alone,
the body fixed (the paper's protocol for new clients). comm_up d - L, comm_down d - L,
L = the head's floats.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from fedbench.algorithms.base import RoundInfo
from fedbench.algorithms.registry import ALGORITHMS
from fedbench.algorithms.split import SplitConfig, SplitMethod, fedrep_phase


class FedRepConfig(SplitConfig):
    name: str = "fedrep"
    head_epochs: int = Field(
        default=10, ge=0, description="the head's share of the K local steps (paper: 10 epochs)"
    )
    body_epochs: int = Field(
        default=1, ge=0, description="the body's share of the K local steps (paper: 1 epoch)"
    )
    order: Literal["head_first", "body_first"] = Field(
        default="head_first",
        description="which part trains first: head_first (Algorithm 1) or body_first",
    )

    @model_validator(mode="after")
    def _some_epochs(self) -> FedRepConfig:
        if self.head_epochs + self.body_epochs == 0:
            raise ValueError(
                "head_epochs and body_epochs are both 0; set head_epochs 10, body_epochs 1"
            )
        return self


@ALGORITHMS.register("fedrep")
class FedRep(SplitMethod):
    """The head for K_h steps with the body fixed, then the body with the head fixed."""

    Params = FedRepConfig
    params: FedRepConfig
    paper = "Collins et al. 2021 (ICML), FedRep"
    client_state_desc = "its head (L floats)"

    def personal_names(self) -> frozenset[str]:
        return self.spec.head_params

    def trained_names(self, k: int, info: RoundInfo) -> frozenset[str]:
        p = self.params
        phase = fedrep_phase(k, info.local_steps, p.head_epochs, p.body_epochs, p.order)
        head = self.spec.head_params
        return head if phase == "head" else frozenset(self.spec.names) - head
