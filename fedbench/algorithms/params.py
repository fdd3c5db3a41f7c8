"""The hyperparameters every algorithm shares, and the one name -> hyperparameter-model dispatch.

Each algorithm subclasses `AlgorithmConfig` with its own fields and names that subclass as its
`Params`; the run config's `algorithm:` section is validated by the model its `name` selects
(`algorithm_params`). This module sits beside the algorithms: fedbench.config imports it to type
and validate `RunConfig.algorithm`, and nothing in fedbench/algorithms/ imports fedbench.config.
"""

from __future__ import annotations

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

    name: str = DEFAULT_ALGORITHM
    lr: float = Field(default=3.0e-4, gt=0)
    lr_schedule: Literal["constant", "cosine", "exp"] = "cosine"
    lr_decay: float = Field(default=0.998, gt=0, description="gamma of the exp schedule")
    server_lr: float = Field(default=1.0, gt=0)
    weight_decay: float = Field(default=0.01, ge=0)
    grad_clip: float | None = Field(default=10.0, gt=0)
    weighting: Literal["uniform", "samples"] = "uniform"


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
