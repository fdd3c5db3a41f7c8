"""Federated algorithms, one module per family, registered by name in ALGORITHMS."""

from fedbench.algorithms import (  # noqa: F401  (registration)
    fadas,
    fafed,
    fedadamom,
    fedadamw,
    fedavg,
    fedavgm,
    fedcada,
    fedcm,
    fedlada,
    fedopt,
    fedprox,
    local_adam,
    local_adamw,
    scaffold,
)
from fedbench.algorithms.base import Algorithm, ParamSpec, RoundInfo
from fedbench.algorithms.registry import ALGORITHMS
from fedbench.privacy import algorithms as _dp_variants  # noqa: F401  (last: wraps the above)

__all__ = ["ALGORITHMS", "Algorithm", "ParamSpec", "RoundInfo"]
