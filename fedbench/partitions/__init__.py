"""Partition kinds (how the training set is split over clients), one module per kind,
registered by name in PARTITIONS.

Every module of this package is imported here, so a new kind is one new module (a function
decorated with `@PARTITIONS.register(name)`) and no list to edit. `partition.kind` in a run
config names one; `fedbench.data.partition.partition` applies it.
"""

from fedbench.partitions.base import (
    KIND_SETTINGS,
    PartitionSettings,
    PartitionTask,
    Split,
    reads,
    settings_read,
)
from fedbench.partitions.registry import PARTITIONS
from fedbench.registry import import_submodules

import_submodules(__name__, __path__)
PARTITIONS.open()  # lookups load the plugins first (fedbench.plugins)

__all__ = [
    "KIND_SETTINGS",
    "PARTITIONS",
    "PartitionSettings",
    "PartitionTask",
    "Split",
    "reads",
    "settings_read",
]
