"""fedbench: reproducible federated-optimisation experiments (FedAdamW, DP-FedAdamW, FedAdamom).

The Python API (docs/api.md): `load_config`, `train`, `run_table`, `make_report`, and the
registries `ALGORITHMS`, `MODELS`, `DATASETS`, `PARTITIONS`, `FIGURES`. They are imported on
first use, so that `import fedbench` (and the command line's start) stays light.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from fedbench.threads import passive_wait_policy

# Before anything imports torch, which reads OMP_WAIT_POLICY once (fedbench.threads).
passive_wait_policy()

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS = {
    "load_config": "fedbench.api",
    "train": "fedbench.api",
    "run_table": "fedbench.api",
    "make_report": "fedbench.api",
    "TableResult": "fedbench.api",
    "TableFailed": "fedbench.api",
    "RunConfig": "fedbench.config",
    "RunResult": "fedbench.engine.run",
    "FedbenchError": "fedbench.errors",
    "ALGORITHMS": "fedbench.algorithms",
    "MODELS": "fedbench.models",
    "DATASETS": "fedbench.data",
    "PARTITIONS": "fedbench.partitions",
    "FIGURES": "fedbench.figures",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'fedbench' has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
