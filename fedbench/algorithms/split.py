"""Split-model personalisation: what FedBN, FedPer, FedRep, LG-FedAvg and FedBABU share
(docs/personalised.md, "The split-model methods: what they share").

A split method partitions the model's trainable tensors in two: a *shared* part that every
sampled client uploads and the server averages, and the rest, which never goes over the wire.
Its personal part (`PersonalAlgorithm.personal_names`) is loaded over x before a client trains
and stored after (fedbench.algorithms.personal); its local schedule says which tensors local step k
trains (`trained_names`: all of them, the body, the head), the others not moving at all
(`masked_sgd_step_`); its server step applies the mean update to the shared part only
(`SplitMethod.server_update`), so x's copy of the other tensors stays at its initialisation
even under client-level DP, whose noise on those coordinates is discarded.

    method       personal (stored)         trained at step k           shared (uploaded)
    FedPer       head                      all                         body
    FedRep       head                      head for k <= K_h, then     body
                                           body (order: head_first)
    LG-FedAvg    body                      all                         head
    FedBN        BatchNorm layers          all                         all but BatchNorm
    FedBABU      - (head frozen at init)   body                        body

A mask is one bool per trainable tensor in the spec's order (`ParamSpec.names`). The rule
pieces are elementwise per tensor (a Python-level choice of tensors, then torch._foreach_*
ops), so the same rule runs on one client's tensors and on the vectorised engine's stacked
rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from pydantic import Field

from fedbench.algorithms.base import (
    Floats,
    ParamSpec,
    RoundInfo,
    Scalar,
    State,
    Tensors,
    TensorSeq,
    add_coupled_decay_,
    add_scaled_,
)
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.personal import PersonalAlgorithm, PersonalConfig
from fedbench.errors import FedbenchError

#: One bool per trainable tensor, in the algorithm's order.
Mask = tuple[bool, ...]
Phase = Literal["head", "body"]
Order = Literal["head_first", "body_first"]


def pick(tensors: TensorSeq, mask: Mask) -> Tensors:
    """The tensors whose mask entry is True, in order (the same tensor objects: views to update
    in place)."""
    if len(tensors) != len(mask):
        raise ValueError(f"{len(tensors)} tensors but a mask of {len(mask)}")
    return [t for t, m in zip(tensors, mask, strict=True) if m]


def mask_of(names: Sequence[str], chosen: frozenset[str] | set[str]) -> Mask:
    """The mask of the tensors named in `chosen` (each must be a trainable tensor's name)."""
    unknown = set(chosen) - set(names)
    if unknown:
        raise ValueError(f"not trainable tensors of the model: {sorted(unknown)}")
    return tuple(name in chosen for name in names)


def masked_sgd_step_(
    y: TensorSeq, g: TensorSeq, trained: Mask, *, lr: Scalar, weight_decay: float
) -> None:
    """y_j <- y_j - lr (g_j + lambda y_j) for the tensors with trained[j]; the others are left
    exactly as they are (no weight decay on a frozen tensor: the papers' gradient step is on the
    trained block only). g may be overwritten."""
    ys, gs = pick(y, trained), pick(g, trained)
    if not ys:
        return
    add_coupled_decay_(gs, ys, weight_decay)
    add_scaled_(ys, gs, -lr)


def head_steps(local_steps: int, head_epochs: int, body_epochs: int) -> int:
    """FedRep's K_h: the share of a client's K local steps spent on the head, in the ratio of the
    paper's head and body epochs, rounded down: K_h = floor(K h / (h + b)); the body gets the
    other K - K_h. With K a multiple of a client's steps per epoch (K = (h + b) * n_i / B) this
    is exactly h epochs of head steps."""
    total = head_epochs + body_epochs
    if total <= 0:
        raise ValueError("head_epochs + body_epochs must be positive")
    return local_steps * head_epochs // total


def fedrep_phase(
    k: int, local_steps: int, head_epochs: int, body_epochs: int, order: Order
) -> Phase:
    """What FedRep's local step k (1-based) of K trains: with `head_first` (Collins et al. 2021,
    Algorithm 1) steps 1..K_h the head, the rest the body; with `body_first` the body's K - K_h
    steps come first."""
    k_head = head_steps(local_steps, head_epochs, body_epochs)
    if order == "head_first":
        return "head" if k <= k_head else "body"
    return "body" if k <= local_steps - k_head else "head"


class SplitConfig(PersonalConfig):
    """The local SGD of the split methods (fedavg's defaults) and their evaluation fine-tuning."""

    lr: float = Field(default=0.1, gt=0)
    weight_decay: float = Field(default=1.0e-3, ge=0)
    finetune_steps: int = Field(
        default=10,
        ge=0,
        description="local SGD steps of the personal part (the method's fine-tuning) that the "
        "personalised evaluation runs on each client, and on each unseen client; 0: none",
    )


class SplitMethod(PersonalAlgorithm):
    """Base of the split-model methods (module docstring): local SGD on the tensors of
    `trained_names`, the upload and server step on `shared_names`, the personal part of
    `personal_names` kept on the client, and fine-tuning of `finetune_names`."""

    Params = SplitConfig
    params: SplitConfig
    supports_privacy = True
    uses_head = True

    def __init__(self, params: AlgorithmConfig, spec: ParamSpec, *, num_clients: int) -> None:
        super().__init__(params, spec, num_clients=num_clients)
        if self.uses_head and spec.head_params == frozenset(spec.names):
            raise FedbenchError(
                f"{params.name} splits the model into a body and a head, but this model's head "
                "is the whole model (logreg); use a model with a body: cnn, mlp, resnet18, ..."
            )
        # Every mask a step can ask for, made here: the object keeps no state from the runs
        # it serves (the rule contract, tests/algorithms/test_rule_contract.py).
        every = frozenset(spec.names)
        parts = (every, spec.head_params, every - spec.head_params, self.personal_names())
        self._masks = {names: mask_of(spec.names, names) for names in parts}
        self.shared_mask = self.mask(self.shared_names())
        self.personal_index, self.finetune_index  # noqa: B018 (the base's cached indices)

    # --- the split -----------------------------------------------------------------------------
    def shared_names(self) -> frozenset[str]:
        """The tensors clients upload and the server averages (default: all but the personal
        part)."""
        return frozenset(self.spec.names) - self.personal_names()

    def trained_names(self, k: int, info: RoundInfo) -> frozenset[str]:
        """The tensors local step k trains (default: all of them)."""
        return frozenset(self.spec.names)

    def finetune_names(self) -> frozenset[str] | None:
        """The evaluation's fine-tuning trains the personal part (FedBABU: its own switch)."""
        return self.personal_names()

    def mask(self, names: frozenset[str]) -> Mask:
        """The mask of `names` (those of the split's parts are made once, in __init__)."""
        found = self._masks.get(names)
        return mask_of(self.spec.names, names) if found is None else found

    def n_local(self) -> int:
        """L: the floats of the tensors that are not uploaded (the personal part, or FedBABU's
        frozen head)."""
        return sum(
            int(torch.Size(s).numel())
            for s, shared in zip(self.spec.shapes, self.shared_mask, strict=True)
            if not shared
        )

    @classmethod
    def upload_size(cls, params: AlgorithmConfig) -> Floats:
        return Floats(d=1, local=-1)

    @classmethod
    def download_size(cls, params: AlgorithmConfig) -> Floats:
        return Floats(d=1, local=-1)

    # --- the rule -------------------------------------------------------------------------------
    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        # k is a Python int: the split methods do not set capturable_step.
        trained = self.mask(self.trained_names(int(k), info))
        masked_sgd_step_(y, g, trained, lr=info.lr, weight_decay=self.params.weight_decay)

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        """x <- x + eta_g Delta_bar on the shared part only. Without noise the other part of
        Delta_bar is exactly 0 and this is the default step; under client-level DP its noise
        is discarded, so x's copy of the personal part is never moved by it."""
        shared = self.shared_mask
        torch._foreach_add_(
            pick(x, shared), pick(mean["delta"], shared), alpha=self.params.server_lr
        )
