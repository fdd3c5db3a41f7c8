"""The algorithm contract (DESIGN.md, "The algorithm contract").

An algorithm owns its validated hyperparameters, its server state, the per-client state it keeps
across rounds, the local rule applied after each gradient, what a client uploads and the server
aggregation. The engine owns everything else. States are plain dicts of tensors / lists of
tensors so that checkpoints load with `torch.load(weights_only=True)`, and local rules are
written over lists of tensors (torch._foreach_*) so the same rule serves every engine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from fedbench.config import AlgorithmConfig

Tensors = list[Tensor]
State = dict[str, Any]


@dataclass(frozen=True)
class ParamSpec:
    """The trainable parameters of the model, as the algorithms see them."""

    names: list[str]
    shapes: list[torch.Size]
    #: Number of attention heads per parameter name where the model knows it (Hessian blocks).
    heads: dict[str, int]

    @property
    def d(self) -> int:
        return sum(int(torch.Size(s).numel()) for s in self.shapes)


@dataclass(frozen=True)
class RoundInfo:
    """What a rule may know about the current round r (0-based)."""

    round: int
    lr: float
    local_steps: int
    num_clients: int
    sampled: int
    #: Std of the DP noise in each coordinate of g (sigma*C/B; 0 without privacy).
    grad_noise_std: float = 0.0


class Algorithm(ABC):
    """Base class: FedAvg's upload (Delta_i) and server step x <- x + eta_g * Delta_bar."""

    Params: ClassVar[type[AlgorithmConfig]] = AlgorithmConfig
    #: The paper that defines the algorithm (shown by `fedbench list algorithms`).
    paper: ClassVar[str] = ""
    #: Human-readable per-client state kept across rounds ("-" if none).
    client_state_desc: ClassVar[str] = "-"
    #: comm_up in units of d for `fedbench list algorithms` (B = number of blocks).
    comm_up_label: ClassVar[str] = "d"

    def __init__(self, params: AlgorithmConfig, spec: ParamSpec, *, num_clients: int) -> None:
        self.params = params
        self.spec = spec
        self.num_clients = num_clients

    # --- communication (floats per participating client per round; ALGORITHMS.md) -----------
    def comm_up(self) -> float:
        return float(self.spec.d)

    def comm_down(self) -> float:
        return float(self.spec.d)

    # --- server -------------------------------------------------------------------------------
    def init_server_state(self, x: Tensors) -> State:
        return {}

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        """Default server step x <- x + eta_g * Delta_bar, in place."""
        torch._foreach_add_(x, mean["delta"], alpha=self.params.server_lr)

    # --- client -------------------------------------------------------------------------------
    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        """The local state of one client for one round (optimizer moments, corrections...)."""
        return {}

    @abstractmethod
    def local_step(self, y: Tensors, g: Tensors, local: State, k: int, info: RoundInfo) -> None:
        """Update y in place after gradient g of local step k (1-based); g may be overwritten."""

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[dict[str, Tensors], State | None]:
        """What the client uploads (mean-aggregated by the engine) and its new persistent state."""
        return {"delta": torch._foreach_sub(y, x)}, client_state

    # --- diagnostics ------------------------------------------------------------------------------
    def v_block_means(self, local: State) -> Tensor | None:
        """The block means of this client's second moment v after its K steps (FedAdamW Figure 2,
        `v_spread`); None for algorithms that keep no v."""
        return None


def tensor_means(tensors: Tensors) -> Tensor:
    """One mean per tensor, as one vector (the `tensor` block partition)."""
    return torch.stack([t.mean() for t in tensors])


def zeros_like(tensors: Tensors) -> Tensors:
    return [torch.zeros_like(t) for t in tensors]


def add_coupled_decay_(g: Tensors, y: Tensors, weight_decay: float) -> None:
    """Coupled (L2) weight decay: g <- g + lambda * y (SGD, Adam, FedLADA)."""
    if weight_decay:
        torch._foreach_add_(g, y, alpha=weight_decay)
