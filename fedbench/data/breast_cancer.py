"""The Wisconsin diagnostic breast-cancer data (scikit-learn's bundled copy): a real tabular
binary task that needs no download, for quick runs on vector inputs."""

from __future__ import annotations

import numpy as np
import torch

from fedbench.config import DataConfig
from fedbench.data.base import DATASETS, Dataset

#: The fixed train/test split's seed: every run sees the same split.
SPLIT_SEED = 0


@DATASETS.register("breast_cancer")
def breast_cancer(cfg: DataConfig) -> Dataset:
    """Wisconsin breast cancer: 569 tumours, 30 features, malignant or benign; a fixed
    stratified 80/20 split (455/114), each feature standardised with the training mean and
    std."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    bunch = load_breast_cancer()
    x_tr, x_te, y_tr, y_te = train_test_split(
        bunch.data.astype(np.float32),
        bunch.target.astype(np.int64),
        test_size=0.2,
        stratify=bunch.target,
        random_state=SPLIT_SEED,
    )
    mean, std = x_tr.mean(axis=0), x_tr.std(axis=0)
    return Dataset(
        name="breast_cancer",
        x_train=torch.from_numpy((x_tr - mean) / std),
        y_train=torch.from_numpy(y_tr),
        x_test=torch.from_numpy((x_te - mean) / std),
        y_test=torch.from_numpy(y_te),
        num_classes=2,
        source="embedded: sklearn.datasets.load_breast_cancer",
    )
