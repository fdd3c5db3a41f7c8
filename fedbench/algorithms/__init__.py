"""Federated algorithms, one module per family, registered by name in ALGORITHMS.

Every module of this package is imported here (a new algorithm is one new module: no list to
edit), then every algorithm that supports privacy gets its dp_ twin.
"""

from fedbench.algorithms.base import Algorithm, ClientUpload, Floats, ParamSpec, RoundInfo
from fedbench.algorithms.dp import register_plain_dp_variants
from fedbench.algorithms.hyperparams import AlgorithmConfig
from fedbench.algorithms.registry import ALGORITHMS
from fedbench.personal import methods as _personal_methods
from fedbench.registry import import_submodules

import_submodules(__name__, __path__)
# The personalised methods live in their own package (fedbench.personal) but one registry.
import_submodules(_personal_methods.__name__, _personal_methods.__path__)
register_plain_dp_variants()
# From here on a lookup loads the plugins first; each plugin algorithm gets its dp_ twin too.
ALGORITHMS.open(complete=register_plain_dp_variants)

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "AlgorithmConfig",
    "ClientUpload",
    "Floats",
    "ParamSpec",
    "RoundInfo",
]
