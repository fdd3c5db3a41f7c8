"""Degenerate data is refused in one line at load, before a model or a partition is sized by it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedbench.config import load_run_config
from fedbench.data.base import load_dataset
from fedbench.errors import FedbenchError
from fedbench.partitions.base import MAX_REUSE


def _npz(tmp_path: Path, y_train, x_train=None) -> Path:
    path = tmp_path / "data.npz"
    x = np.zeros((len(y_train), 4), np.float32) if x_train is None else x_train
    np.savez(
        path,
        x_train=x,
        y_train=np.asarray(y_train, np.int64),
        x_test=np.zeros((2, 4), np.float32),
        y_test=np.array([0, 1]),
    )
    return path


def _load(path: Path):
    return load_dataset(load_run_config(None, ["data.name=npz", f"data.path={path}"]).data)


def test_a_label_far_beyond_the_samples_is_refused(tmp_path: Path):
    with pytest.raises(FedbenchError, match=r"labels up to 1,000,000,000 for 11 samples"):
        _load(_npz(tmp_path, [0, 1, 0, 1, 0, 1, 0, 1, 10**9 // 2 * 2]))


def test_many_classes_within_the_allowance_load(tmp_path: Path):
    assert _load(_npz(tmp_path, [0, 1, 999])).num_classes == 1000


def test_no_training_samples_is_refused(tmp_path: Path):
    with pytest.raises(FedbenchError, match="has 0 training and 2 test samples"):
        _load(_npz(tmp_path, [], np.zeros((0, 4), np.float32)))


def test_image_size_and_reused_samples_are_bounded():
    with pytest.raises(FedbenchError, match=r"data\.image_size"):
        load_run_config(None, ["data.image_size=100000"])
    from fedbench.engine.setup import prepare_run

    sets = ["partition.kind=dirichlet_equal", "partition.samples_per_client=1000000000"]
    with pytest.raises(FedbenchError, match=f"more than {MAX_REUSE} times the"):
        prepare_run(load_run_config(None, [*sets, "model.name=logreg"]))
