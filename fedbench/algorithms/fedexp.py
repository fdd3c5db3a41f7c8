"""FedExP (Jhunjhunwala, Wang & Joshi, ICLR 2023, "FedExP: Speeding Up Federated Averaging via
Extrapolation", Algorithm 1): FedAvg's clients; the server extrapolates along the mean update with
a step size computed each round from the sampled clients' own updates (the extrapolated
projection-onto-convex-sets step the paper adapts to federated learning).

    y <- y - eta_r * (g + lambda * y)                                      (each local step)
    eta_g = max(1, sum_{i in S} ||Delta_i||^2 / (2 |S| (||Delta_bar||^2 + eps)))
    x <- x + eta_g * Delta_bar                                             (server)

The paper writes Delta_i = x - y_i and x <- x - eta_g * Delta_bar; the norms and the step are the
same. eps (1e-3 here, a hyperparameter in the paper) keeps eta_g finite when the clients' updates
cancel. With `weighting: samples` the sum and |S| become weighted (sum_i w_i ||Delta_i||^2 over
2 sum_i w_i), which is the paper's rule for equal weights; `server_lr` multiplies eta_g
(1.0: the paper). The paper reports the average of the last two iterates, because the
extrapolated iterates oscillate; fedbench evaluates x itself, as for every algorithm.

The step needs every sampled client's ||Delta_i||^2, not only the mean: FedExP is the example of
`uses_client_uploads` (docs/extending.md). comm_up d, comm_down d.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from pydantic import Field
from torch import Tensor

from fedbench.algorithms.base import ClientUpload, RoundInfo, State, Tensors, TensorSeq
from fedbench.algorithms.fedavg import FedAvg, FedAvgConfig
from fedbench.algorithms.registry import ALGORITHMS


class FedExPConfig(FedAvgConfig):
    name: str = "fedexp"
    eps: float = Field(
        default=1.0e-3, gt=0, description="keeps the extrapolation step finite when updates cancel"
    )


def squared_norm(tensors: TensorSeq) -> Tensor:
    """||t||^2 over a list of tensors, accumulated in float64 (a device scalar)."""
    return torch.stack([torch.sum(t.double() ** 2) for t in tensors]).sum()


def extrapolation_step_size(
    uploads: Sequence[ClientUpload], mean_delta: Tensors, eps: float
) -> Tensor:
    """eta_g = max(1, sum_i w_i ||Delta_i||^2 / (2 sum_i w_i (||Delta_bar||^2 + eps))), as a
    float64 device scalar (the server step reads no value back to the host)."""
    total_weight = sum(u.weight for u in uploads)
    spread = torch.stack([u.weight * squared_norm(u.tensors["delta"]) for u in uploads]).sum()
    return torch.clamp(spread / (2.0 * total_weight * (squared_norm(mean_delta) + eps)), min=1.0)


@ALGORITHMS.register("fedexp")
class FedExP(FedAvg):
    """Local SGD; server step along Delta_bar with an adaptive extrapolation factor eta_g >= 1."""

    Params = FedExPConfig
    paper = "Jhunjhunwala et al. 2023 (ICLR), FedExP, Algorithm 1"
    params: FedExPConfig
    uses_client_uploads = True
    # With DP noise, sum_i ||Delta_i||^2 grows with the noise while the mean averages it out,
    # so eta_g would measure the noise rather than the clients' disagreement: no dp_ twin.
    supports_privacy = False

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        raise TypeError("FedExP's server step needs every upload: call server_update_with_uploads")

    def init_server_state(self, x: Tensors) -> State:
        return {"step_size": torch.ones((), dtype=torch.float64, device=x[0].device)}

    def server_update_with_uploads(
        self,
        x: Tensors,
        mean: dict[str, Tensors],
        uploads: Sequence[ClientUpload],
        server: State,
        info: RoundInfo,
    ) -> None:
        step = extrapolation_step_size(uploads, mean["delta"], self.params.eps)
        server["step_size"] = step
        torch._foreach_add_(x, torch._foreach_mul(mean["delta"], step), alpha=self.params.server_lr)
