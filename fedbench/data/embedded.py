"""Datasets that need no download: scikit-learn's digits (the embedded default) and a seeded
Gaussian mixture for tests."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import torch

from fedbench.config import DataConfig
from fedbench.data.base import DATASETS, Dataset


def _digits_rows() -> tuple[np.ndarray, np.ndarray]:
    """The 1797 digits as (8x8 images, labels), read from scikit-learn's own copy of the data
    (digits.csv.gz, found without importing scikit-learn: that import alone took 1.6-2.2 s of
    every digits run's start, in the sweep's driver and again in each worker); where that file is
    not where scikit-learn 1.x keeps it, through `load_digits`."""
    spec = importlib.util.find_spec("sklearn")
    folders = spec.submodule_search_locations if spec is not None else None
    path = Path(next(iter(folders))) / "datasets" / "data" / "digits.csv.gz" if folders else None
    if path is not None and path.is_file():
        rows = np.loadtxt(path, delimiter=",")
        return rows[:, :-1].reshape(-1, 8, 8), rows[:, -1].astype(np.int64)
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return bunch.images, bunch.target.astype(np.int64)


def _digits_split() -> tuple[np.ndarray, np.ndarray]:
    """The fixed train and test rows (1437/360) in their order, shipped with fedbench: what
    scikit-learn's `train_test_split(test_size=0.2, stratify=labels, random_state=0)` draws (a
    test checks it does), pinned so that a later scikit-learn cannot move the split."""
    split = json.loads((Path(__file__).parent / "digits_split.json").read_text())
    return np.asarray(split["train"], dtype=np.int64), np.asarray(split["test"], dtype=np.int64)


@DATASETS.register("digits")
def digits(cfg: DataConfig) -> Dataset:
    """scikit-learn's 1797 8x8 digits: a fixed stratified 80/20 split (1437/360), pixels scaled to
    [0, 1] (they range 0..16) and normalised with the training mean and std."""
    images, labels = _digits_rows()
    x = images.astype(np.float32) / 16.0
    y = labels
    train, test = _digits_split()
    x_tr, x_te, y_tr, y_te = x[train], x[test], y[train], y[test]
    mean, std = float(x_tr.mean()), float(x_tr.std())

    def prep(a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy((a - mean) / std).unsqueeze(1)

    return Dataset(
        name="digits",
        x_train=prep(x_tr),
        y_train=torch.from_numpy(y_tr),
        x_test=prep(x_te),
        y_test=torch.from_numpy(y_te),
        num_classes=10,
        source="embedded: sklearn.datasets.load_digits",
    )


SYNTHETIC_SHAPE = {"classes": 10, "dim": 32, "n_train": 2000, "n_test": 500, "seed": 1234}


@DATASETS.register("synthetic")
def synthetic(cfg: DataConfig) -> Dataset:
    """A seeded Gaussian mixture: 10 classes in 32 dimensions, 2000 train / 500 test samples.
    Class means ~ N(0, I), samples = mean + N(0, 1.5^2 I): learnable but not trivially."""
    s = SYNTHETIC_SHAPE
    rng = np.random.default_rng(s["seed"])
    means = rng.normal(size=(s["classes"], s["dim"]))

    def draw(n: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = np.arange(n) % s["classes"]
        rng.shuffle(y)
        x = means[y] + 1.5 * rng.normal(size=(n, s["dim"]))
        return torch.from_numpy(x.astype(np.float32)), torch.from_numpy(y.astype(np.int64))

    x_tr, y_tr = draw(s["n_train"])
    x_te, y_te = draw(s["n_test"])
    return Dataset(
        "synthetic", x_tr, y_tr, x_te, y_te, num_classes=s["classes"], source="generated in memory"
    )
