"""The hyperparameters every algorithm shares, and the one name -> hyperparameter-model dispatch.

Each algorithm subclasses `AlgorithmConfig` with its own fields and names that subclass as its
`Params`; the run config's `algorithm:` section is validated by the model its `name` selects
(`algorithm_params`). This module sits beside the algorithms: fedbench.config imports it to type
and validate `RunConfig.algorithm`, and nothing in fedbench/algorithms/ imports fedbench.config.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from fedbench.algorithms.registry import ALGORITHMS
from fedbench.strict import Strict

if TYPE_CHECKING:
    from fedbench.algorithms.base import Algorithm

#: The algorithm of a run config without an `algorithm.name`.
DEFAULT_ALGORITHM = "fedadamw"


class AlgorithmConfig(Strict):
    """Fields common to every algorithm; each algorithm subclasses it with its own fields."""

    name: str = Field(
        default=DEFAULT_ALGORITHM, description="the algorithm (fedbench list algorithms)"
    )
    lr: float = Field(
        default=3.0e-4, gt=0, description="local learning rate eta_0, where the schedule starts"
    )
    lr_schedule: Literal["constant", "cosine", "exp"] = Field(
        default="cosine", description="the local learning rate's schedule"
    )
    lr_schedule_scope: Literal["round", "local"] = Field(
        default="round",
        description="what the schedule runs over: the R rounds (eta_r, constant within a round) "
        "or the K local steps of every round (restarting at lr each round)",
    )
    lr_decay: float = Field(
        default=0.998, gt=0, description="per-round factor gamma of the exp schedule"
    )
    server_lr: float = Field(
        default=1.0, gt=0, description="server learning rate eta_g on the mean update"
    )
    weight_decay: float = Field(
        default=0.01, ge=0, description="weight decay lambda (coupled or decoupled: per algorithm)"
    )
    grad_clip: float | None = Field(
        default=10.0, gt=0, description="clip each raw local gradient to this L2 norm; null: off"
    )
    weighting: Literal["uniform", "samples"] = Field(
        default="uniform", description="client weights in the server mean: equal, or n_i"
    )


def schedule_factor(kind: str, decay: float, t: int, horizon: int) -> float:
    """The schedule's multiple of `lr` at position t of `horizon` (t = 0..horizon-1): cosine
    0.5 * (1 + cos(pi t / horizon)), exp decay^t, constant 1. Over the rounds (t = r, horizon R)
    or, with `lr_schedule_scope: local`, over the local steps (t = k - 1, horizon K)."""
    if kind == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * t / horizon))
    if kind == "exp":
        return decay**t
    return 1.0


def algorithm_name(section: object) -> str:
    """The algorithm a (raw or validated) `algorithm:` section selects."""
    if isinstance(section, AlgorithmConfig):
        return section.name
    if isinstance(section, Mapping):
        return str(section.get("name", DEFAULT_ALGORITHM))
    return DEFAULT_ALGORITHM


def algorithm_class(section: object) -> type[Algorithm]:
    """The registered Algorithm class a section selects (an unknown name is a FedbenchError)."""
    return ALGORITHMS.get(algorithm_name(section))


def algorithm_params(section: Any) -> AlgorithmConfig:
    """Validate an `algorithm:` section (a mapping, None for the defaults, or an already built
    config) with the hyperparameter model of the algorithm its `name` selects."""
    if isinstance(section, AlgorithmConfig):
        return section
    if section is None:
        section = {}
    if not isinstance(section, Mapping):
        raise ValueError("must be a mapping with at least a `name`")
    return algorithm_class(section).Params.model_validate(section)


def private_identity(params: AlgorithmConfig, private: bool) -> AlgorithmConfig:
    """The algorithm section a run is filed under. With a `privacy:` section the engine feeds
    every algorithm the privatised gradient, so `X` there and its plain twin `dp_X` (no rule of
    its own) are one computation: both are named `dp_X`, so that the same run has one run id.
    Anything else is returned unchanged (no non-private config changes its id)."""
    twin = f"dp_{params.name}"
    if not private or twin not in ALGORITHMS:
        return params
    cls = ALGORITHMS.get(twin)
    if cls.dp_twin_of != params.name:
        return params  # dp_X has a rule of its own (dp_fedadamw): a different computation
    return cls.Params.model_validate({**params.model_dump(), "name": twin})
