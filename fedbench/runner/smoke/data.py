"""Generated data in each dataset's real on-disk format, for `--smoke`: the run loads it through
the dataset's own loader, so the input shape, the number of classes, the tokenizer length and
the augmentation are the paper setting's, while nothing has to be downloaded.

One writer per dataset; a dataset without a writer (scikit-learn's embedded digits and breast
cancer data, the synthetic mixture, a user's npz or an added dataset) is used as configured.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.config import DataConfig

#: Training / test samples of a generated set: enough for 2 clients' batches and an evaluation
#: that stays cheap at paper sizes (Swin-Base at 224 x 224 on a CPU), whatever the class count.
N_TRAIN = 64
N_TEST = 4


def _images(rng: np.random.Generator, n: int, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(0, 256, size=(n, *shape), dtype=np.uint8)


def _labels(classes: int, n: int) -> np.ndarray:
    return np.arange(n) % classes


def _cifar(name: str, classes: int) -> Callable[[Path, DataConfig], dict[str, Any]]:
    def write(root: Path, cfg: DataConfig) -> dict[str, Any]:
        from fedbench.data.vision import write_cifar

        rng = np.random.default_rng(0)
        y_train, y_test = _labels(classes, N_TRAIN), _labels(classes, N_TEST)
        write_cifar(
            root,
            name,
            (_images(rng, len(y_train), (32, 32, 3)), y_train),
            (_images(rng, len(y_test), (32, 32, 3)), y_test),
        )
        return {"root": str(root), "path": None, "download": False}

    return write


def _idx(path: Path, array: np.ndarray) -> None:
    """An IDX file (the (Fashion-)MNIST format): magic 0x08 (uint8), ndim, big-endian dims."""
    header = bytes([0, 0, 8, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


def _fmnist(root: Path, cfg: DataConfig) -> dict[str, Any]:
    from fedbench.data.vision import FMNIST_FILES

    rng = np.random.default_rng(0)
    folder = root / "FashionMNIST" / "raw"
    folder.mkdir(parents=True, exist_ok=True)
    y_train, y_test = _labels(10, N_TRAIN), _labels(10, N_TEST)
    arrays = {
        "x_train": _images(rng, len(y_train), (28, 28)),
        "y_train": y_train,
        "x_test": _images(rng, len(y_test), (28, 28)),
        "y_test": y_test,
    }
    for key, stem in FMNIST_FILES.items():
        _idx(folder / f"{stem}.gz", arrays[key])
    return {"root": str(root), "path": None, "download": False}


def _tinyimagenet(root: Path, cfg: DataConfig) -> dict[str, Any]:
    from fedbench.data.miniature import write_tiny_imagenet

    folder = write_tiny_imagenet(root, classes=200, train_per_class=1, val_per_class=1, size=64)
    # All 200 classes (the model's head), but only the first N_TEST validation images.
    annotations = folder / "val" / "val_annotations.txt"
    annotations.write_text("".join(annotations.read_text().splitlines(True)[:N_TEST]))
    return {"root": str(root), "path": str(folder), "download": False}


def _glue(task: str) -> Callable[[Path, DataConfig], dict[str, Any]]:
    def write(root: Path, cfg: DataConfig) -> dict[str, Any]:
        from fedbench.data.miniature import write_glue

        folder = write_glue(root / "glue", task, n_train=N_TRAIN, n_dev=N_TEST)
        return {"root": str(root), "path": str(folder), "download": False}

    return write


def _leaf(root: Path, cfg: DataConfig) -> dict[str, Any]:
    # LEAF's JSON layout, written by fedbench.data.leaf_sample under root/leaf-sample.
    return {"root": str(root), "path": "sample", "download": False}


WRITERS: dict[str, Callable[[Path, DataConfig], dict[str, Any]]] = {
    "cifar10": _cifar("cifar10", 10),
    "cifar100": _cifar("cifar100", 100),
    "fmnist": _fmnist,
    "tinyimagenet": _tinyimagenet,
    "femnist": _leaf,
    "shakespeare": _leaf,
    "celeba": _leaf,
}


def writer_for(name: str) -> Callable[[Path, DataConfig], dict[str, Any]] | None:
    if name.startswith("glue/"):
        from fedbench.data.miniature import ROW_FORMATS

        task = name.split("/", 1)[1]
        return _glue(task) if task in ROW_FORMATS else None
    return WRITERS.get(name)


def smoke_data(cfg: DataConfig, root: Path) -> tuple[dict[str, Any], str | None]:
    """The data section's replacement fields (root, path, download) pointing at generated files
    of `cfg.name`, written once under `root`; and what it replaced (None: used as configured).
    Every dataset's files sit where its loader looks under one data root, so code that loads a
    dataset by name with the default root finds them too when $FEDBENCH_DATA is `root`."""
    write = writer_for(cfg.name)
    if write is None:
        return {}, None
    what = f"data {cfg.name}: generated files in its real format"
    written = root / f".smoke-{cfg.name.replace('/', '-')}.json"  # one writing per check
    if written.is_file():
        return json.loads(written.read_text()), what
    root.mkdir(parents=True, exist_ok=True)
    fields = write(root, cfg)
    written.write_text(json.dumps(fields))
    return fields, what
