"""FedBN (Li, Jiang, Zhang, Kamp & Dou, "FedBN: Federated Learning on Non-IID Features via Local
Batch Normalization", ICLR 2021): every BatchNorm layer stays on its client, its running
statistics included; everything else is averaged as FedAvg does.

    y_i <- (x_S, n_i)                             (n_i: its stored BatchNorm weight and bias,
                                                   with its running mean, variance and batch
                                                   count; x's and the server's initial
                                                   statistics on a first visit)
    y <- y - eta_r * (g + lambda * y)             (each local step, every tensor; the running
                                                   statistics update in the forward pass)
    n_i <- (y_N, statistics) ;  Delta_i = (y_S - x_S, 0)
    x_S <- x_S + eta_g * mean_i Delta_i,S         (server; x_N and the server's statistics
                                                   never change)

The authors' code averages every state_dict entry whose name lacks "bn": the BatchNorm affine
parameters and the running mean, variance and batch count stay local. fedbench finds the
BatchNorm layers by module type (not by name) and keeps the same five per layer. A model
without BatchNorm layers has nothing to keep local (fedbn would be fedavg), so such a run is
refused. DP runs refuse BatchNorm models (fedbench.privacy.mechanism), so fedbn has no DP twin.

Evaluation fine-tuning (and an unseen client): `finetune_steps` SGD steps on the BatchNorm
weight and bias, the rest fixed; the running statistics follow the fine-tuning batches (train
mode). comm_up d - L, comm_down d - L, L = the BatchNorm layers' weights and biases.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from fedbench.algorithms.base import ParamSpec, State, TensorSeq
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.registry import ALGORITHMS
from fedbench.algorithms.split import SplitConfig, SplitMethod
from fedbench.errors import FedbenchError

#: The key of a client's BatchNorm statistics in its stored state.
STATISTICS = "batchnorm_statistics"


class FedBNConfig(SplitConfig):
    name: str = "fedbn"


@ALGORITHMS.register("fedbn")
class FedBN(SplitMethod):
    """FedAvg on everything but the BatchNorm layers, which stay on each client."""

    Params = FedBNConfig
    paper = "Li et al. 2021 (ICLR), FedBN"
    client_state_desc = "its BatchNorm layers: weight, bias, running statistics"
    uses_head = False
    supports_privacy = False

    def __init__(self, params: AlgorithmConfig, spec: ParamSpec, *, num_clients: int) -> None:
        super().__init__(params, spec, num_clients=num_clients)
        if not spec.batchnorm_params:
            raise FedbenchError(
                "fedbn keeps the BatchNorm layers on the clients, but this model has none (it "
                "would be fedavg); use a model with BatchNorm: cnn_bn, resnet18 or a LEAF CNN "
                "with model.norm bn"
            )

    def personal_names(self) -> frozenset[str]:
        return self.spec.batchnorm_params

    def stored_floats(self) -> int:
        """The BatchNorm weights and biases, as many running means and variances (one of each
        per channel, as the weight and the bias), and each layer's int64 batch count (the bytes
        of 2 floats)."""
        return 2 * super().stored_floats() + 2 * len(self.spec.batchnorm_buffers) // 3

    def local_buffers(self) -> frozenset[int]:
        return frozenset(self.spec.batchnorm_buffers)

    def load_client(self, y: TensorSeq, buffers: Sequence[Tensor], stored: State | None) -> None:
        super().load_client(y, buffers, stored)
        if stored is None or STATISTICS not in stored:
            return
        for j, value in zip(self.spec.batchnorm_buffers, stored[STATISTICS], strict=True):
            buffers[j].copy_(value)

    def store_buffers(self, state: State | None, buffers: Sequence[Tensor]) -> State | None:
        kept = [buffers[j].detach().clone() for j in self.spec.batchnorm_buffers]
        return {**(state or {}), STATISTICS: kept}
