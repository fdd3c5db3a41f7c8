"""FedLADA (Sun et al., IEEE TPAMI 2023, "Efficient Federated Learning via Local Adaptive Amended
Optimizer with Linear Speedup", Algorithm 1): local AMSGrad amended by the global average
gradient, with the server averaging the clients' second moments.

Server broadcasts x, g_a = -Delta_bar^{r-1} / (K * eta_{r-1}) and v_bar (full d-vectors, zero at
r = 0). Client init m = 0, v = v_hat = v_bar. Each local step (coupled decay inside g):
    g <- g + lambda * y
    m <- beta1*m + (1-beta1)*g ;  v <- beta2*v + (1-beta2)*g^2 ;  v_hat <- max(v_hat, v)
    y <- y - eta_r * (alpha * m / (sqrt(v_hat) + eps) + (1 - alpha) * g_a)
No bias correction. Upload Delta_i and v_hat_i. Server: x <- x + eta_g * Delta_bar;
v_bar <- mean_i v_hat_i ; g_a <- -Delta_bar / (K * eta_r). alpha (0.1) weighs the local adaptive
direction. comm_up 2d, comm_down 3d (docs/algorithms.md, "Local adaptive methods").
"""

from __future__ import annotations

import torch
from pydantic import Field

from fedbench.algorithms.adam import adam_step_, decay_and_update_moments_
from fedbench.algorithms.base import (
    Algorithm,
    Floats,
    RoundInfo,
    Scalar,
    State,
    Tensors,
    Upload,
    add_scaled_,
    mean_gradient,
    tensor_means,
    zeros_like,
)
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.registry import ALGORITHMS


class FedLADAConfig(AlgorithmConfig):
    name: str = "fedlada"
    weight_decay: float = Field(default=1.0e-3, ge=0)
    alpha: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="weight of the local adaptive step; 1 - alpha: last round's global direction",
    )
    beta1: float = Field(default=0.9, ge=0, lt=1, description="first-moment decay")
    beta2: float = Field(default=0.999, ge=0, lt=1, description="second-moment decay")
    eps: float = Field(default=1.0e-8, gt=0, description="added to sqrt(v_hat) in the step")


@ALGORITHMS.register("fedlada")
class FedLADA(Algorithm):
    """Local AMSGrad from the averaged v, amended by the previous round's global gradient."""

    Params = FedLADAConfig
    capturable_step = True
    paper = "Sun et al. 2023 (TPAMI), FedLADA"
    params: FedLADAConfig
    #: v_hat_i, whose mean starts the next round's AMSGrad denominator sqrt(v_hat) + eps.
    nonnegative_uploads = frozenset({"v_hat"})

    @classmethod
    def upload_size(cls, params: AlgorithmConfig) -> Floats:
        # pragma: no mutate block
        return Floats(d=2)  # Delta_i, v_hat_i

    @classmethod
    def download_size(cls, params: AlgorithmConfig) -> Floats:
        return Floats(d=3)  # x, g_a, v_bar

    def init_server_state(self, x: Tensors) -> State:
        return {"g_a": zeros_like(x), "v_bar": zeros_like(x)}

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        super().server_update(x, mean, server, info)
        server["v_bar"] = mean["v_hat"]
        server["g_a"] = mean_gradient(mean["delta"], info)

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        return {
            "m": zeros_like(x),
            "v": [t.clone() for t in server["v_bar"]],
            "v_hat": [t.clone() for t in server["v_bar"]],
            "amend": torch._foreach_mul(server["g_a"], 1.0 - self.params.alpha),
        }

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        p = self.params
        decay_and_update_moments_(y, g, local, p, lr=info.lr, decoupled=False)  # Adam's L2
        torch._foreach_maximum_(local["v_hat"], local["v"])
        # No bias correction: corrections of 1.
        adam_step_(
            y,
            local["m"],
            local["v_hat"],
            lr=info.lr * p.alpha,
            bias_correction1=1.0,
            bias_correction2=1.0,
            eps=p.eps,
        )
        add_scaled_(y, local["amend"], -info.lr)

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        return {"delta": torch._foreach_sub(y, x), "v_hat": local["v_hat"]}, client_state

    def v_block_means(self, local: State) -> torch.Tensor | None:
        return tensor_means(local["v"])
