"""FedCAda (Zhou et al., 2024, arXiv 2405.11811, "FedCAda: Adaptive Client-Side Optimization for
Accelerated and Stable Federated Learning"), a baseline of the FedAdamom paper: NOT IMPLEMENTED.

What its public abstract establishes: clients run Adam; the server aggregates the clients' Adam
moments m and v together with the model (3x upload); the bias corrections of m and v on the
clients are adjusted by a function of the communication round that constrains them strongly in
early rounds and fades as training proceeds. What it does not establish: that adjustment function
itself, which the paper chooses among several candidates in its method section. fedbench copies
no rule it cannot cite, so the name is registered (configs can list the row) and every run of it
stops before anything is written with the reason below; a table shows the row as
"not implemented: ...". Implementing it needs the function from the paper's method section.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from fedbench.algorithms.base import Algorithm, Floats, ParamSpec, RoundInfo, Scalar, State, Tensors
from fedbench.algorithms.fedavg import FedAvgConfig
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.registry import ALGORITHMS
from fedbench.errors import FedbenchError

NOT_IMPLEMENTED = (
    "not implemented: FedCAda's round-dependent bias-correction adjustment has no readable "
    "public source (docs/algorithms.md)"
)


class FedCAdaConfig(FedAvgConfig):
    name: str = "fedcada"
    beta1: float = Field(default=0.9, ge=0, lt=1, description="decay of the client's m")
    beta2: float = Field(default=0.999, ge=0, lt=1, description="decay of the client's v")
    eps: float = Field(default=1.0e-8, gt=0, description="added to sqrt(v_hat)")


@ALGORITHMS.register("fedcada")
class FedCAda(Algorithm):
    """Registered so that tables can name the row; refuses to run (see NOT_IMPLEMENTED)."""

    Params = FedCAdaConfig
    paper = "Zhou et al. 2024, FedCAda (arXiv 2405.11811): not implemented"
    supports_vectorized: ClassVar[bool] = False
    #: No dp_fedcada: there is no rule to privatise.
    supports_privacy: ClassVar[bool] = False

    @classmethod
    def upload_size(cls, params: AlgorithmConfig) -> Floats:
        return Floats(d=3)  # the model, m and v (the abstract's 3x upload)

    def __init__(self, params: AlgorithmConfig, spec: ParamSpec, *, num_clients: int) -> None:
        raise FedbenchError(NOT_IMPLEMENTED)

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        raise FedbenchError(NOT_IMPLEMENTED)
