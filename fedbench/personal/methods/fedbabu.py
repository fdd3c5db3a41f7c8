"""FedBABU (Oh, Kim & Yun, "FedBABU: Toward Enhanced Representation for Federated Image
Classification", ICLR 2022): only the body is trained and aggregated; the head stays at its
random initialisation on every client and the server, and each client fine-tunes at evaluation.

    y_i <- x                                      (x_H: the model's initial head, never changed)
    y_B <- y_B - eta_r (g_B + lambda y_B)         (each local step; the head does not move)
    Delta_i = (y_B - x_B, 0)                      (the head's part is exactly 0: not sent)
    x_B <- x_B + eta_g * mean_i Delta_i,B         (server)

Nothing is stored per client. Evaluation (fedbench.personal.evaluate): each client's model before
fine-tuning is x; after it, x fine-tuned with `finetune_steps` SGD steps on the client's
training data: the whole model (`finetune: full`, the paper's default, which fine-tunes body
and head), or the head alone (`finetune: head`, the variant the paper compares with).
comm_up d - L, comm_down d - L, L = the head's floats.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fedbench.algorithms.base import RoundInfo
from fedbench.algorithms.registry import ALGORITHMS
from fedbench.algorithms.split import SplitConfig, SplitMethod


class FedBABUConfig(SplitConfig):
    name: str = "fedbabu"
    finetune: Literal["full", "head"] = Field(
        default="full",
        description="what the evaluation fine-tunes: the whole model (the paper) or the head",
    )


@ALGORITHMS.register("fedbabu")
class FedBABU(SplitMethod):
    """The body trained and averaged, the head frozen at its initialisation; fine-tuning at
    evaluation."""

    Params = FedBABUConfig
    params: FedBABUConfig
    paper = "Oh, Kim & Yun 2022 (ICLR), FedBABU"
    #: Nothing personal is kept between rounds: the engine's personal hooks stay off.
    personalises = False

    def shared_names(self) -> frozenset[str]:
        return frozenset(self.spec.names) - self.spec.head_params

    def trained_names(self, k: int, info: RoundInfo) -> frozenset[str]:
        return self.shared_names()

    def finetune_names(self) -> frozenset[str] | None:
        return None if self.params.finetune == "full" else self.spec.head_params
