"""Datasets (in-memory tensors), partitions and client batch sampling."""

from fedbench.data import embedded, glue, leaf, npz, tinyimagenet, vision  # noqa: F401  (registration)
from fedbench.data.base import DATASETS, Dataset, load_dataset

__all__ = ["DATASETS", "Dataset", "load_dataset"]
