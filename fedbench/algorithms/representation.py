"""Rules whose local objective adds a term on the model's representation (MOON: Li, He & Song,
"Model-Contrastive Federated Learning", CVPR 2021, Eq. 3-4): the contract such a rule
implements, and the one objective that both executors' gradient oracles differentiate.

A rule opts in by deriving from `RepresentationRule` (one algorithm's hook, so not part of every
algorithm's base class). The representation z of a batch is the input of the model's final
classification layer (fedbench.models.representation). The sequential executor differentiates
`representation_objective` with autograd on the resident model; the vectorised executor vmaps
its gradient over the stacked rows, each row against its own anchors
(fedbench.engine.stacked.representation_gradients). Neither writes the objective itself.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from torch import Tensor

from fedbench.algorithms.base import RoundInfo, State, Tensors
from fedbench.step import Objective


class RepresentationRule(ABC):
    """A rule whose local objective adds `representation_loss` to the batch's objective."""

    @abstractmethod
    def representation_loss(
        self,
        z: Tensor,
        anchor: Callable[[Tensors], Tensor],
        local: State,
        info: RoundInfo,
    ) -> Tensor:
        """The term added to the batch's objective, from the batch's representation z (with
        gradient) and `anchor(weights)`, the same batch's representation under other weights
        (fixed, without gradient)."""


def uses_representation(algorithm: Any) -> bool:
    """True for a `RepresentationRule`, given as an instance or as its class."""
    cls = algorithm if isinstance(algorithm, type) else type(algorithm)
    return issubclass(cls, RepresentationRule)


def representation_objective(
    rule: RepresentationRule,
    objective: Objective,
    forward: Callable[[Tensor], tuple[Tensor, Callable[[], Tensor]]],
    represent_with: Callable[[Tensors, Tensor], Tensor],
    x: Tensor,
    labels: Tensor,
    local: State,
    info: RoundInfo,
) -> Tensor:
    """The batch's objective on its logits plus the rule's representation term: `forward(x)`
    gives the representation z under the weights being trained and a function that gives the
    logits classify(z); `represent_with(weights, x)` the anchors' representation under other
    weights.

    The logits are asked for after the representation term: where the sequential executor's
    resident model computes classify(z) then, and the vectorised one has them already, each
    executor's autograd sums z's gradient contributions in the order it always has (golden runs
    hold both bitwise)."""
    z, logits = forward(x)

    def anchor(weights: Tensors) -> Tensor:
        return represent_with(weights, x)

    term = rule.representation_loss(z, anchor, local, info)
    return objective.loss(logits(), labels) + term
