"""The base class of personalised methods (docs/personalised.md, "Writing a method").

A personalised method is an `Algorithm` (fedbench.algorithms.base) with three more things:

- its personal part: the trainable parameters that stay on the client (`personal_names`, a
  subset of `ParamSpec.names`: the head `spec.head_params`, everything, ...). The engine loads
  them over x before the client trains (`load_client`), `client_end` stores them in the
  client's state as `{"personal": [tensors in spec order]}` and uploads a zero delta for them,
  so that they are never aggregated and x keeps its initial values there;
- its fine-tuning (`finetune_step`, `finetune_names`, the `finetune_steps` / `finetune_lr`
  hyperparameters): what the evaluation protocol runs for the "after fine-tuning" column
  and on clients that never trained (fedbench.personal.evaluate);
- its stored state lives in the run's client store (fedbench.personal.store): checkpointed
  with the run, bounded in memory, the same for both executors.

A method with more personal state (Ditto's full model v_i, APFL's alpha_i, FedBN's buffers)
overrides `personal_state` / `load_client` / `store_buffers` and keeps it under other keys of
the same dict.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import torch
from pydantic import Field
from torch import Tensor

from fedbench.algorithms.base import (
    Algorithm,
    ParamSpec,
    RoundInfo,
    Scalar,
    State,
    Tensors,
    TensorSeq,
    Upload,
)
from fedbench.algorithms.fedavg import sgd_step_
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.errors import FedbenchError

#: The key of a client's personal parameters in its stored state.
PERSONAL = "personal"


class PersonalConfig(AlgorithmConfig):
    """The hyperparameters every personalised method adds: its fine-tuning."""

    finetune_steps: int = Field(
        default=0,
        ge=0,
        description="local SGD steps of the fine-tuning the personalised evaluation runs on "
        "each client (the after-fine-tuning columns, unseen clients); 0: none",
    )
    finetune_lr: float | None = Field(
        default=None, gt=0, description="the fine-tuning's learning rate; null: lr"
    )


class PersonalAlgorithm(Algorithm):
    """Base of the personalised methods: the personal part and the fine-tuning (module
    docstring). Subclasses set `Params` (a `PersonalConfig`), `paper`, `local_step` and
    `personal_names`; the rest has defaults."""

    Params: ClassVar[type[AlgorithmConfig]] = PersonalConfig
    personalises = True
    #: The privacy of a personal part is stated per method (docs/personalised.md, "DP");
    #: a method sets this once its rules are written.
    supports_privacy = False
    #: Whether the method needs `ParamSpec.head_params` (a model family with a head).
    uses_head: ClassVar[bool] = False

    def __init__(self, params: AlgorithmConfig, spec: ParamSpec, *, num_clients: int) -> None:
        super().__init__(params, spec, num_clients=num_clients)
        if self.uses_head and not spec.head_params:
            raise FedbenchError(
                f"{params.name} keeps the model's head on the client, but this model has no "
                "head fedbench knows (fedbench.personal.heads); use cnn, resnet18, vit_tiny, "
                "a LEAF model or a text classifier"
            )

    # --- the personal part -----------------------------------------------------------------------
    def personal_names(self) -> frozenset[str]:
        """The trainable parameters that stay on the client (default: none)."""
        return frozenset()

    @property
    def personal_index(self) -> list[int]:
        """The positions (in the spec's order) of `personal_names` (computed on each call, not
        cached: an algorithm object keeps no state between runs, the rule contract)."""
        keep = self.personal_names()
        return [j for j, name in enumerate(self.spec.names) if name in keep]

    def personal_state(self, y: TensorSeq, stored: State | None) -> State | None:
        """The state to store after training: the personal parameters of y, copied."""
        if not self.personal_index:
            return stored
        return {PERSONAL: [y[j].detach().clone() for j in self.personal_index]}

    def stored_floats(self) -> int:
        """Floats stored per client (the plan's estimate of the store's size): the personal
        parameters; a method that stores more (Ditto's v_i beside them) says so here."""
        return sum(int(torch.Size(self.spec.shapes[j]).numel()) for j in self.personal_index)

    def load_client(self, y: TensorSeq, buffers: Sequence[Tensor], stored: State | None) -> None:
        """Write the client's personal parameters over x (a new client keeps x's)."""
        if stored is None or PERSONAL not in stored:
            return
        for j, value in zip(self.personal_index, stored[PERSONAL], strict=True):
            y[j].copy_(value)

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        """Delta_i with zeros at the personal parameters (never aggregated: x keeps its values
        there), and the personal part stored."""
        delta = list(torch._foreach_sub(y, x))
        for j in self.personal_index:
            delta[j].zero_()
        return {"delta": delta}, self.personal_state(y, client_state)

    # --- fine-tuning -----------------------------------------------------------------------------
    def finetune_steps(self) -> int:
        """Local steps of the evaluation's fine-tuning (0: none, the columns are equal)."""
        return int(getattr(self.params, "finetune_steps", 0))

    def finetune_lr(self) -> float:
        lr = getattr(self.params, "finetune_lr", None)
        return float(self.params.lr if lr is None else lr)

    def finetune_names(self) -> frozenset[str] | None:
        """The parameters fine-tuning updates (None: all; FedRep / FedBABU: the head)."""
        return None

    @property
    def finetune_index(self) -> list[int]:
        names = self.finetune_names()
        return [j for j, n in enumerate(self.spec.names) if names is None or n in names]

    def finetune_step(
        self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo
    ) -> None:
        """One step of the fine-tuning, after gradient g (y, g in the spec's order; info.lr is
        `finetune_lr`): plain SGD with the method's coupled weight decay, on the parameters of
        `finetune_names`."""
        index = self.finetune_index
        sgd_step_(
            [y[j] for j in index],
            [g[j] for j in index],
            lr=info.lr,
            weight_decay=self.params.weight_decay,
        )


class FineTuning(Algorithm):
    """A method's fine-tuning as a local rule, so that the evaluation runs it with the engine's
    own client loop (fedbench.engine.client.run_client)."""

    supports_privacy = False

    def __init__(self, method: PersonalAlgorithm) -> None:
        super().__init__(method.params, method.spec, num_clients=method.num_clients)
        self.method = method

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        self.method.finetune_step(y, g, local, k, info)
