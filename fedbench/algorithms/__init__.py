"""Federated algorithms, one module per family, registered by name in ALGORITHMS."""

from fedbench.algorithms import (  # noqa: F401  (registration)
    fedadamom,
    fedadamw,
    fedavg,
    fedavgm,
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

__all__ = ["ALGORITHMS", "Algorithm", "ParamSpec", "RoundInfo"]
