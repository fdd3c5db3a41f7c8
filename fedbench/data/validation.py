"""A validation split held out of the training data (`data.val_fraction`).

Hyperparameters are chosen on it (`fedbench tune`), never on the test set: with a fraction f > 0
the run trains on the other (1 - f) of the training samples and evaluates on the held-out ones,
which take the place of the test set. The split is seeded by `partition.seed`, so every run seed
and every tuning trial of a table sees the same validation samples.

`run_data` is the one place that loads a run's data: every path that trains or evaluates a run
(the engine, `fedbench blocks`, `fedbench epsilon`'s client sizes) gets it from there, so none can
load the test set for a validation run (tests/data/test_validation.py checks the callers).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from fedbench.config import RunConfig
from fedbench.data.base import Dataset, load_dataset
from fedbench.errors import FedbenchError


def run_data(cfg: RunConfig) -> Dataset:
    """The data run `cfg` trains and evaluates on: the configured dataset with
    `data.val_fraction` of its training samples held out as the evaluation set (the test set is
    then not loaded into the run at all)."""
    return holdout_validation(load_dataset(cfg.data), cfg.data.val_fraction, cfg.partition.seed)


def holdout_validation(data: Dataset, fraction: float, seed: int) -> Dataset:
    """`data` with a random `fraction` of its training samples moved to the evaluation set."""
    if fraction <= 0:
        return data
    n = data.n_train
    n_val = round(fraction * n)
    if n_val < 1 or n_val >= n:
        raise FedbenchError(
            f"data.val_fraction {fraction} leaves {n_val} of {n} training samples for validation; "
            "choose a fraction that keeps both splits non-empty"
        )
    order = np.random.default_rng(seed).permutation(n)
    val, train = np.sort(order[:n_val]), np.sort(order[n_val:])
    val_idx = torch.as_tensor(val, dtype=torch.int64, device=data.x_train.device)
    train_idx = torch.as_tensor(train, dtype=torch.int64, device=data.x_train.device)
    return replace(
        data,
        x_train=data.x_train[train_idx],
        y_train=data.y_train[train_idx],
        x_test=data.x_train[val_idx],
        y_test=data.y_train[val_idx],
        client_train=None if data.client_train is None else data.client_train[train],
        # Per-client test indices point into the real test set, which a validation run must not
        # see: per-client evaluation then holds out partition.client_test_fraction instead.
        client_test=None,
    )
