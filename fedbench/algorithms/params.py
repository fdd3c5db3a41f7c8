"""The one name -> hyperparameter-model dispatch, over the registry.

Each algorithm subclasses `AlgorithmConfig` (fedbench.algorithms.hyperparams, re-exported here)
with its own fields and names that subclass as its `Params`; the run config's `algorithm:`
section is validated by the model its `name` selects (`algorithm_params`). fedbench.config
imports this module to type and validate `RunConfig.algorithm`, and nothing in
fedbench/algorithms/ imports fedbench.config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.hyperparams import DEFAULT_ALGORITHM, AlgorithmConfig, schedule_factor
from fedbench.algorithms.registry import ALGORITHMS

__all__ = [
    "DEFAULT_ALGORITHM",
    "AlgorithmConfig",
    "algorithm_class",
    "algorithm_name",
    "algorithm_params",
    "private_identity",
    "schedule_factor",
]


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
