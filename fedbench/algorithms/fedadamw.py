"""FedAdamW (Liu et al., AAAI 2026, Algorithm 2): local AdamW with block-mean second-moment
aggregation and global update alignment.

Client (y = x^r, m = 0, v = expand(v_bar)), each local step k with t = r*K + k:
    m <- beta1*m + (1-beta1)*g ;  v <- beta2*v + (1-beta2)*g^2
    m_hat = m / (1 - beta1^k) ;   v_hat = v / (1 - beta2^t)
    y <- y - eta_r * ( m_hat/(sqrt(v_hat)+eps) + alpha*Delta_G + lambda*y )
Upload Delta_i = y^K - x and the block means of v^K. Server:
    x <- x + eta_g * Delta_bar ;  Delta_G <- -Delta_bar / (K*eta_r) ;  v_bar <- mean_i b_i

The paper's `- lambda*x` is a typo (docs/algorithms.md, "FedAdamW"): decay shrinks the weights. v is bias-corrected
with the global t (the paper's local k inflates v_hat ~1000x when v starts from v_bar), with local
k whenever v starts from zero. Switches for the ablations: alpha, v_agg, m_agg, decoupled, blocks,
v_bias_correction, and two for the other forms of the algorithm:
- `alignment: convex` is Appendix A's Algorithm 3 (the theory's FedAdamW, FedAdamW Table 11):
      y <- y - eta_r * ( alpha*m_hat/(sqrt(v_hat)+eps) + (1-alpha)*Delta_G + lambda*y )
- `m_bias_correction: global` is the authors' public script: m restarts from zero each round but
  is corrected with the global step, m_hat = m / (1 - beta1^t).
comm_up d + B, comm_down 2d + B by default.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

import torch
from pydantic import Field, model_validator

from fedbench.algorithms.adam import adam_step_, decay_and_update_moments_
from fedbench.algorithms.base import (
    Algorithm,
    Floats,
    ParamSpec,
    RoundInfo,
    Scalar,
    State,
    Tensors,
    Upload,
    add_scaled_,
    mean_gradient,
    zeros_like,
)
from fedbench.algorithms.blocks import BlockKind, build_partition
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.registry import ALGORITHMS


class FedAdamWConfig(AlgorithmConfig):
    name: str = "fedadamw"
    alpha: float = Field(
        default=0.5, ge=0, description="weight of the global update alignment (0 removes it)"
    )
    beta1: float = Field(default=0.9, ge=0, lt=1, description="first-moment decay")
    beta2: float = Field(default=0.999, ge=0, lt=1, description="second-moment decay")
    eps: float = Field(default=1.0e-8, gt=0, description="added to sqrt(v_hat) in the step")
    v_agg: Literal["block_mean", "full", "none"] = Field(
        default="block_mean",
        description="v across rounds: restore block means, the whole v, or restart from 0",
    )
    m_agg: bool = Field(
        default=False, description="also upload m; clients start from the mean m (comm_up + d)"
    )
    decoupled: bool = Field(
        default=True, description="decoupled decay (AdamW); false adds lambda*y to the gradient"
    )
    blocks: BlockKind = Field(
        default="auto", description="the partition of v into blocks (auto: chosen per model)"
    )
    v_bias_correction: Literal["global", "local", "none"] = Field(
        default="global", description="v_hat's step count: global t = rK + k, local k, or none"
    )
    m_bias_correction: Literal["local", "global"] = Field(
        default="local", description="m_hat's step count: local k, or global t (public code)"
    )
    alignment: Literal["additive", "convex"] = Field(
        default="additive", description="additive (Algorithm 2) or convex (Algorithm 3) alignment"
    )

    @model_validator(mode="after")
    def _convex_weights(self) -> FedAdamWConfig:
        if self.alignment == "convex" and self.alpha > 1:
            raise ValueError(
                "alignment convex weighs the two steps by alpha and 1 - alpha: alpha <= 1"
            )
        return self

    @property
    def adaptive_weight(self) -> float:
        """The weight of the adaptive step: 1 (Algorithm 2) or alpha (convex, Algorithm 3)."""
        return self.alpha if self.alignment == "convex" else 1.0

    @property
    def align_weight(self) -> float:
        """The weight of Delta_G: alpha (Algorithm 2) or 1 - alpha (convex, Algorithm 3)."""
        return 1.0 - self.alpha if self.alignment == "convex" else self.alpha


@ALGORITHMS.register("fedadamw")
class FedAdamW(Algorithm):
    """Local AdamW + block-mean v aggregation + global update alignment."""

    Params = FedAdamWConfig
    capturable_step = True
    paper = "Liu et al. 2026 (AAAI), FedAdamW, Algorithm 2"
    params: FedAdamWConfig
    #: The second moments it uploads (block means, or v itself with v_agg: full).
    nonnegative_uploads = frozenset({"v_blocks", "v"})

    def __init__(self, params: FedAdamWConfig, spec: ParamSpec, *, num_clients: int) -> None:
        super().__init__(params, spec, num_clients=num_clients)
        self.partition = build_partition(params.blocks, spec.shapes, spec)

    # --- communication --------------------------------------------------------------------------
    @staticmethod
    def _moments_size(p: FedAdamWConfig) -> Floats:
        """v's block means (or all of v) and, with Agg-m, m: sent both ways."""
        # pragma: no mutate block
        v = {"block_mean": Floats(blocks=1), "full": Floats(d=1), "none": Floats()}[p.v_agg]
        return v + Floats(d=1 if p.m_agg else 0)

    # (type: ignore[override] on both sizes: they are only ever called with the class's own
    # Params, by Algorithm.__init_subclass__ and comm_up / comm_down)
    @classmethod
    def upload_size(cls, params: FedAdamWConfig) -> Floats:  # type: ignore[override]
        # pragma: no mutate block
        return Floats(d=1) + cls._moments_size(params)

    @classmethod
    def download_size(cls, params: FedAdamWConfig) -> Floats:  # type: ignore[override]
        # x, Delta_G (only needed when its weight is not zero), then the moments.
        return Floats(d=2 if params.align_weight else 1) + cls._moments_size(params)

    def n_blocks(self) -> int:
        return self.partition.n_blocks

    # --- server ---------------------------------------------------------------------------------
    def init_server_state(self, x: Tensors) -> State:
        state: State = {}
        if self.params.align_weight:
            state["delta_g"] = zeros_like(x)
        if self.params.v_agg == "block_mean":
            state["v_bar"] = torch.zeros(
                self.partition.n_blocks, dtype=x[0].dtype, device=x[0].device
            )
        elif self.params.v_agg == "full":
            state["v_bar"] = zeros_like(x)
        if self.params.m_agg:
            state["m_bar"] = zeros_like(x)
        return state

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        super().server_update(x, mean, server, info)
        if self.params.align_weight:
            # Computed with this round's lr, applied with the next round's (authors' code).
            server["delta_g"] = mean_gradient(mean["delta"], info)
        if self.params.v_agg == "block_mean":
            server["v_bar"] = mean["v_blocks"][0]
        elif self.params.v_agg == "full":
            server["v_bar"] = mean["v"]
        if self.params.m_agg:
            server["m_bar"] = mean["m"]

    # --- client ---------------------------------------------------------------------------------
    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        p = self.params
        if p.v_agg == "block_mean":
            v = self.partition.expand(server["v_bar"])
        elif p.v_agg == "full":
            v = [t.clone() for t in server["v_bar"]]
        else:
            v = zeros_like(x)
        m = [t.clone() for t in server["m_bar"]] if p.m_agg else zeros_like(x)
        local: State = {"m": m, "v": v}
        if p.align_weight:
            local["align"] = torch._foreach_mul(server["delta_g"], p.align_weight)
        return local

    def _bias_corrections(self, k: Scalar, info: RoundInfo) -> tuple[Scalar, Scalar]:
        p = self.params
        t = info.round * info.local_steps + k
        # m restarts from zero each round unless it is aggregated; the public script still
        # corrects it with t (m_bias_correction global), which shrinks its first steps ~10x.
        bc1 = 1.0 - p.beta1 ** (t if p.m_agg or p.m_bias_correction == "global" else k)
        bc2: Scalar
        if p.v_bias_correction == "none":
            bc2 = 1.0
        elif p.v_bias_correction == "local" or p.v_agg == "none":
            bc2 = 1.0 - p.beta2**k
        else:
            bc2 = 1.0 - p.beta2**t
        return bc1, bc2

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        p = self.params
        decay_and_update_moments_(y, g, local, p, lr=info.lr, decoupled=p.decoupled)
        bc1, bc2 = self._bias_corrections(k, info)
        # Convex alignment scales the adaptive step by alpha: its step size becomes alpha*eta_r.
        step_info = (
            info if p.adaptive_weight == 1.0 else replace(info, lr=info.lr * p.adaptive_weight)
        )
        self._adaptive_step_(y, local, bc1, bc2, step_info)
        if p.align_weight:
            add_scaled_(y, local["align"], -info.lr)

    def _adaptive_step_(
        self, y: Tensors, local: State, bc1: Scalar, bc2: Scalar, info: RoundInfo
    ) -> None:
        """y <- y - eta_r * m_hat / (sqrt(v_hat) + eps); DP-FedAdamW changes the denominator."""
        adam_step_(
            y,
            local["m"],
            local["v"],
            lr=info.lr,
            eps=self.params.eps,
            bias_correction1=bc1,
            bias_correction2=bc2,
        )

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        upload: Upload = {"delta": torch._foreach_sub(y, x)}
        if self.params.v_agg == "block_mean":
            upload["v_blocks"] = [self.partition.means(local["v"])]
        elif self.params.v_agg == "full":
            upload["v"] = local["v"]
        if self.params.m_agg:
            upload["m"] = local["m"]
        return upload, client_state

    def v_block_means(self, local: State) -> torch.Tensor | None:
        return self.partition.means(local["v"])
