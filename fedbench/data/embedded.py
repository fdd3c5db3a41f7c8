"""Datasets that need no download: scikit-learn's digits (the embedded default) and a seeded
Gaussian mixture for tests."""

from __future__ import annotations

import numpy as np
import torch

from fedbench.config import DataConfig
from fedbench.data.base import DATASETS, Dataset

DIGITS_SPLIT_SEED = 0


@DATASETS.register("digits")
def digits(cfg: DataConfig) -> Dataset:
    """scikit-learn's 1797 8x8 digits: a fixed stratified 80/20 split (1437/360), pixels scaled to
    [0, 1] (they range 0..16) and normalised with the training mean and std."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    x = bunch.images.astype(np.float32) / 16.0
    y = bunch.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(
        x, y, test_size=0.2, stratify=y, random_state=DIGITS_SPLIT_SEED
    )
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
