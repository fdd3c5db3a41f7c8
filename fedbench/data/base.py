"""The in-memory dataset every run trains on, and the dataset registry.

A dataset is four tensors (train/test inputs and labels) held in memory on the run's device; a
batch is drawn by indexing, and augmentation runs on tensors, so there are no DataLoader workers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from fedbench.config import DataConfig
from fedbench.errors import FedbenchError
from fedbench.registry import Registry

#: A train-time augmentation: (batch, generator) -> augmented batch, on the batch's device.
Augment = Callable[[Tensor, torch.Generator], Tensor]


@dataclass(frozen=True)
class Dataset:
    name: str
    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor
    num_classes: int
    augment: Augment | None = None
    #: For `partition.kind: natural`: the client id of each training sample.
    client_train: np.ndarray | None = None
    #: A per-client test split (LEAF's per-user test data): client i's indices into
    #: x_test / y_test (may be built lazily, one tensor per access).
    client_test: Sequence[Tensor] | None = None
    #: Applied on the device to every batch (train, after `augment`, and eval), e.g. turning
    #: uint8 images into normalised floats; must leave already-prepared batches unchanged.
    prepare: Callable[[Tensor], Tensor] | None = None
    #: What `test_acc` measures: accuracy (%) or mcc (Matthews correlation x 100, GLUE CoLA).
    metric: str = "accuracy"
    #: Where the data was read from (recorded in the run folder); load_dataset fills in the
    #: resolved data.path / data.root when a loader leaves it None.
    source: str | None = None

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.x_train.shape[1:])

    @property
    def n_train(self) -> int:
        return int(self.y_train.shape[0])

    def to(self, device: torch.device) -> Dataset:
        return replace(
            self,
            x_train=self.x_train.to(device),
            y_train=self.y_train.to(device),
            x_test=self.x_test.to(device),
            y_test=self.y_test.to(device),
        )


DATASETS: Registry[Callable[[DataConfig], Dataset]] = Registry("dataset")


def data_root(cfg: DataConfig) -> Path:
    """data.root, else $FEDBENCH_DATA, else ~/.cache/fedbench/data."""
    if cfg.root:
        return Path(cfg.root).expanduser()
    env = os.environ.get("FEDBENCH_DATA")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "fedbench" / "data"


def resolved_location(cfg: DataConfig) -> str:
    """data.path if set, else the data root, as absolute paths."""
    if cfg.path:
        return str(Path(cfg.path).expanduser().resolve())
    return str(data_root(cfg).resolve())


def check_root(cfg: DataConfig) -> None:
    """A data.root the user set must be a folder, whichever dataset reads it: a loader that
    falls back to other places (Fashion-MNIST: Debian's copy) would otherwise train on data from
    elsewhere while config.yaml records the root that was never read."""
    if cfg.root is None:
        return
    root = Path(cfg.root).expanduser()
    if not root.is_dir():
        what = "is not a folder" if root.exists() else "does not exist"
        default = data_root(cfg.model_copy(update={"root": None})).resolve()
        source = "$FEDBENCH_DATA" if os.environ.get("FEDBENCH_DATA") else "the default"
        raise FedbenchError(
            f"dataset {cfg.name} not found: data.root {root} {what}; create it and put the data "
            f"there, or drop data.root to read {default} ({source}; $FEDBENCH_DATA, else "
            "~/.cache/fedbench/data)"
        )


def load_dataset(cfg: DataConfig) -> Dataset:
    """Build the configured dataset on the CPU (the engine moves it to the run's device), after
    check_root."""
    check_root(cfg)
    data = DATASETS.get(cfg.name)(cfg)
    if data.source is None:
        data = replace(data, source=resolved_location(cfg))
    check_dataset(data, cfg)
    return data


#: Classes a dataset may have beyond its samples: a label far above the number of samples (a
#: stray 10**9) would size the model's output layer, and every per-class array, by it.
MAX_CLASSES_PER_SAMPLE = 10
MIN_CLASS_ALLOWANCE = 1_000


def check_dataset(data: Dataset, cfg: DataConfig) -> None:
    """Refuse degenerate data in one line, before a model or a partition is sized by it: no
    training or test samples, or labels far beyond the number of samples."""
    where = f"data.name {cfg.name}" + (f" ({cfg.path})" if cfg.path else "")
    n_test = int(data.y_test.shape[0])
    if data.n_train == 0 or n_test == 0:
        raise FedbenchError(
            f"{where} has {data.n_train} training and {n_test} test samples; both splits need "
            "at least one sample"
        )
    allowed = max(MIN_CLASS_ALLOWANCE, MAX_CLASSES_PER_SAMPLE * (data.n_train + n_test))
    if data.num_classes > allowed:
        raise FedbenchError(
            f"{where} has labels up to {data.num_classes - 1:,} for {data.n_train + n_test:,} "
            f"samples (at most {allowed:,} classes are accepted); labels must be class indices "
            "0..K-1: renumber them"
        )
