"""Local-only training: every client trains its own model on its own data and nothing is
shared (the lower baseline of every personalisation paper, e.g. Collins et al. 2021 (ICML),
FedRep, Table 1 "Local Only"; pFL-Bench's "Isolated").

    y_i <- v_i                                    (client i's model; x, the common initial
                                                   model, the first time it trains)
    y_i <- y_i - eta_r * (g + lambda * y_i)       (each local step)
    v_i <- y_i^K                                  (stored; Delta_i = 0: x never moves)

The personal part is every parameter, so the upload is zero and nothing is aggregated. The
"after fine-tuning" column and unseen clients run `finetune_steps` more local SGD steps
(an unseen client: from x, i.e. it trains its own model from the common initialisation).
comm_up 0, comm_down 0 (x is the initial model every client already has).
"""

from __future__ import annotations

from pydantic import Field

from fedbench.algorithms.base import Floats, RoundInfo, Scalar, State, Tensors
from fedbench.algorithms.fedavg import sgd_step_
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.personal import PersonalAlgorithm, PersonalConfig
from fedbench.algorithms.registry import ALGORITHMS


class LocalOnlyConfig(PersonalConfig):
    name: str = "local_only"
    lr: float = Field(default=0.1, gt=0)
    weight_decay: float = Field(default=1.0e-3, ge=0)


@ALGORITHMS.register("local_only")
class LocalOnly(PersonalAlgorithm):
    """Each client trains its own model; nothing is aggregated."""

    Params = LocalOnlyConfig
    paper = "Local-only baseline (Collins et al. 2021, ICML: Table 1)"
    client_state_desc = "v_i: the client's whole model (d)"
    #: Sample level: v_i is trained on privatised gradients only (docs/personalised.md, "DP").
    supports_privacy = True

    @classmethod
    def upload_size(cls, params: AlgorithmConfig) -> Floats:
        return Floats()

    @classmethod
    def download_size(cls, params: AlgorithmConfig) -> Floats:
        return Floats()

    def personal_names(self) -> frozenset[str]:
        return frozenset(self.spec.names)

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        sgd_step_(y, g, lr=info.lr, weight_decay=self.params.weight_decay)
