"""Datasets (in-memory tensors), partitions and client batch sampling.

Every module of this package is imported here, so a new dataset is one new module (a loader
decorated with `@DATASETS.register(name)`, docs/extending.md) and no list to edit.
"""

from fedbench.data.base import DATASETS, Dataset, load_dataset
from fedbench.registry import import_submodules

# miniature is `python -m fedbench.data.miniature DIR` (and imported by the loaders that write
# miniatures on first use); it registers nothing.
import_submodules(__name__, __path__, skip=("miniature",))
DATASETS.open()  # lookups load the plugins first (fedbench.plugins)

__all__ = ["DATASETS", "Dataset", "load_dataset"]
