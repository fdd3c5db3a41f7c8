"""Bring-your-own arrays: an .npz with x_train, y_train, x_test, y_test and optional client_train.

The arrays are used exactly as given: no normalisation, no augmentation. The number of classes
is max label + 1; `client_train` (one client id per training sample) drives
`partition.kind: natural`.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import torch

from fedbench.config import DataConfig
from fedbench.data.base import DATASETS, Dataset
from fedbench.errors import FedbenchError

REQUIRED = ("x_train", "y_train", "x_test", "y_test")


@DATASETS.register("npz")
def npz(cfg: DataConfig) -> Dataset:
    """Your own arrays: data.path to an .npz with x_train, y_train, x_test, y_test (+ client_train)."""
    if not cfg.path:
        raise FedbenchError(
            "data.name npz needs data.path: the .npz file with x_train, y_train, x_test, y_test"
        )
    path = Path(cfg.path).expanduser()
    if not path.is_file():
        raise FedbenchError(f"npz file {path} not found; set data.path to an existing .npz file")
    try:
        with np.load(path, allow_pickle=False) as arrays:
            missing = [k for k in REQUIRED if k not in arrays]
            if missing:
                raise FedbenchError(
                    f"{path} lacks {', '.join(missing)}; it needs {', '.join(REQUIRED)}"
                )
            data = {k: arrays[k] for k in arrays.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise FedbenchError(
            f"cannot read {path} as .npz ({exc}); write it with numpy.savez"
        ) from None
    y_train = data["y_train"].astype(np.int64).reshape(-1)
    y_test = data["y_test"].astype(np.int64).reshape(-1)
    if len(y_train) != len(data["x_train"]) or len(y_test) != len(data["x_test"]):
        raise FedbenchError(f"{path}: x and y arrays have different lengths")
    if y_train.size == 0 or y_test.size == 0:  # before any reduction over the labels
        raise FedbenchError(
            f"{path} has {y_train.size} training and {y_test.size} test samples; both splits "
            "need at least one sample"
        )
    if min(y_train.min(), y_test.min()) < 0:
        raise FedbenchError(f"{path}: labels must be integers >= 0")
    client_train = data.get("client_train")
    if client_train is not None:
        client_train = client_train.astype(np.int64).reshape(-1)
        if len(client_train) != len(y_train):
            raise FedbenchError(f"{path}: client_train needs one client id per training sample")
    return Dataset(
        name="npz",
        x_train=torch.from_numpy(data["x_train"].astype(np.float32)),
        y_train=torch.from_numpy(y_train),
        x_test=torch.from_numpy(data["x_test"].astype(np.float32)),
        y_test=torch.from_numpy(y_test),
        num_classes=int(max(y_train.max(), y_test.max())) + 1,
        client_train=client_train,
    )
