"""FedAvg with fine-tuning (FedAvg-FT): FedAvg's training, then each client fine-tunes the
global model on its own data before it is tested (Wang et al. 2019, "Federated evaluation of
on-device personalization", arXiv:1910.10252; Yu et al. 2020, "Salvaging federated learning by
local adaptation", arXiv:2002.04758; the "FedAvg-FT" row of pFL-Bench and FL-bench).

Training is FedAvg's, exactly (fedbench.algorithms.fedavg):

    y <- y - eta_r * (g + lambda * y)            (each local step)
    x <- x + eta_g * mean_i (y_i^K - x)          (server)

Evaluation (fedbench.personal.evaluate): client i's model before fine-tuning is x; after it,
x fine-tuned with `finetune_steps` steps of local SGD on client i's training data at
`finetune_lr` (lr when null) with the same coupled weight decay:

    y <- x;  y <- y - eta_ft * (g + lambda * y)   (finetune_steps times)

fedbench reads "fine-tuning" as every parameter (as Wang et al. do), for a fixed number of
steps (not epochs, so that clients of different sizes do the same work, as the training's K).
Nothing is stored per client (the fine-tuned models are discarded after the test).
comm_up d, comm_down d.
"""

from __future__ import annotations

from pydantic import Field

from fedbench.algorithms.base import RoundInfo, Scalar, State, Tensors
from fedbench.algorithms.fedavg import sgd_step_
from fedbench.algorithms.personal import PersonalAlgorithm, PersonalConfig
from fedbench.algorithms.registry import ALGORITHMS


class FedAvgFTConfig(PersonalConfig):
    name: str = "fedavg_ft"
    lr: float = Field(default=0.1, gt=0)
    weight_decay: float = Field(default=1.0e-3, ge=0)
    finetune_steps: int = Field(
        default=10,
        ge=0,
        description="local SGD steps of each client's fine-tuning before its test",
    )


@ALGORITHMS.register("fedavg_ft")
class FedAvgFT(PersonalAlgorithm):
    """FedAvg, each client fine-tuning the global model before its test."""

    Params = FedAvgFTConfig
    paper = "Wang et al. 2019 (arXiv:1910.10252); FedAvg: McMahan et al. 2017"
    #: Training keeps no personal part: the engine's personal hooks stay off (FedAvg's path).
    personalises = False
    #: Sample level: training is DP-FedAvg's; the evaluation's fine-tuning is outside the
    #: epsilon (docs/personalised.md, "Differential privacy").
    supports_privacy = True

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        sgd_step_(y, g, lr=info.lr, weight_decay=self.params.weight_decay)
