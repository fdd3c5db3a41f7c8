"""tinyimagenet folder and GLUE TSV loaders on generated miniature copies (real formats)."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import numpy as np
import pytest
import torch

from fedbench.config import DataConfig
from fedbench.data import load_dataset
from fedbench.data.glue import TASKS, read_tsv
from fedbench.data.miniature import ROW_FORMATS, write_glue, write_tiny_imagenet
from fedbench.engine.evaluate import evaluate
from fedbench.errors import FedbenchError


def test_tinyimagenet_folder_loads_as_uint8_and_caches(tmp_path):
    folder = write_tiny_imagenet(tmp_path, classes=3, train_per_class=5, val_per_class=2, size=8)
    data = load_dataset(DataConfig(name="tinyimagenet", path=str(folder)))
    assert data.x_train.shape == (15, 3, 8, 8) and data.x_train.dtype == torch.uint8
    assert data.x_test.shape == (6, 3, 8, 8) and data.num_classes == 3
    assert data.y_train.tolist() == [0] * 5 + [1] * 5 + [2] * 5
    assert sorted(data.y_test.tolist()) == [0, 0, 1, 1, 2, 2]
    cache = tmp_path / "tiny-imagenet-200.fedbench-cache"
    assert (cache / "x_train.npy").is_file()
    again = load_dataset(DataConfig(name="tinyimagenet", path=str(folder)))
    assert torch.equal(again.x_train, data.x_train)
    x = data.prepare(data.x_test)
    assert x.dtype == torch.float32 and torch.equal(data.prepare(x), x)
    aug = data.augment(data.x_train, torch.Generator().manual_seed(0))
    assert aug.shape == (15, 3, 8, 8) and aug.dtype == torch.float32 and aug.abs().max() < 3


def test_tinyimagenet_missing_is_a_clean_error(tmp_path):
    with pytest.raises(FedbenchError, match=r"tiny-imagenet-200\.zip"):
        load_dataset(DataConfig(name="tinyimagenet", root=str(tmp_path)))


def test_miniature_writes_every_glue_task_and_only_those():
    # miniature keeps its own table of layouts (it must not import glue, which imports it).
    assert set(ROW_FORMATS) == set(TASKS)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_glue_tsv_layouts(tmp_path, task):
    folder = write_glue(tmp_path, task, n_train=10, n_dev=4)
    info = TASKS[task]
    texts, labels = read_tsv(folder / "train.tsv", info)
    assert len(texts) == len(info.tsv_text) and len(texts[0]) == len(labels) == 10
    assert set(labels.tolist()) <= set(range(info.classes))


def test_glue_tokenised_dataset_and_mcc(tmp_path):
    data = load_dataset(DataConfig(name="glue/cola", root=str(tmp_path), path="miniature"))
    assert data.x_train.shape == (160, 128) and data.x_train.dtype == torch.int64
    assert (data.x_train[:, 0] == 0).all() and data.metric == "mcc"  # <s> first, pad id 1
    assert list((tmp_path / "miniature" / "glue" / "cola").glob("fedbench-tokens-*.npz"))

    class Constant(torch.nn.Module):
        def forward(self, x):
            return torch.zeros(len(x), 2)

    mcc, loss = evaluate(Constant(), data.x_test, data.y_test, 16, metric="mcc")
    assert mcc == 0.0 and np.isclose(loss, np.log(2))
