"""Federated algorithms, one module per family, registered by name in ALGORITHMS.

Every module of this package is imported here (a new algorithm is one new module: no list to
edit), then every algorithm that supports privacy gets its dp_ twin.
"""

import importlib
import pkgutil

from fedbench.algorithms.base import Algorithm, ClientUpload, Floats, ParamSpec, RoundInfo
from fedbench.algorithms.dp import register_plain_dp_variants
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.registry import ALGORITHMS

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
register_plain_dp_variants()

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "AlgorithmConfig",
    "ClientUpload",
    "Floats",
    "ParamSpec",
    "RoundInfo",
]
