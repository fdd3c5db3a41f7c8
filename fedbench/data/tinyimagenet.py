"""Tiny-ImageNet (Le & Yang 2015) from the standard `tiny-imagenet-200` folder.

Layout: wnids.txt, train/<wnid>/images/*.JPEG (500 per class), val/images/*.JPEG and
val/val_annotations.txt (file, wnid, box). The labelled validation split is the test set (the
official test split has no labels). Images are decoded once into uint8 arrays (100000 x 3 x 64 x
64 = 1.2 GB) and cached as .npy files in `tiny-imagenet-200.fedbench-cache/` next to the folder;
normalisation (ImageNet mean/std) and augmentation (random resized crop + flip) run on the device
per batch, and `data.image_size` resizes on the device (224 for Swin/ViT).

Where: data.path (the tiny-imagenet-200 folder), else data.root/tiny-imagenet-200.
`data.path: miniature` writes and uses a miniature folder in the same format (tests, `quick`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from fedbench.config import DataConfig
from fedbench.data.augment import normalise_uint8, random_resized_crop_flip
from fedbench.data.base import DATASETS, Dataset, data_root
from fedbench.errors import FedbenchError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
FOLDER = "tiny-imagenet-200"
ARRAYS = ("x_train", "y_train", "x_test", "y_test")


def _decode(path: Path) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as img:
        return np.asarray(img.convert("RGB"), dtype=np.uint8).transpose(2, 0, 1)


def read_folder(folder: Path) -> dict[str, np.ndarray]:
    """Decode the folder into uint8 arrays (N, 3, H, W) and int64 labels (wnids.txt order)."""
    wnids = (folder / "wnids.txt").read_text().split()
    index = {w: i for i, w in enumerate(wnids)}
    train_files: list[Path] = []
    train_labels: list[int] = []
    for wnid in wnids:
        files = sorted((folder / "train" / wnid / "images").glob("*.JPEG"))
        train_files += files
        train_labels += [index[wnid]] * len(files)
    test_files: list[Path] = []
    test_labels: list[int] = []
    for line in (folder / "val" / "val_annotations.txt").read_text().splitlines():
        fields = line.split("\t")
        if len(fields) >= 2:
            test_files.append(folder / "val" / "images" / fields[0])
            test_labels.append(index[fields[1]])
    if not train_files or not test_files:
        raise FedbenchError(
            f"dataset tinyimagenet: no images found under {folder}/train or {folder}/val"
        )
    return {
        "x_train": np.stack([_decode(f) for f in train_files]),
        "y_train": np.asarray(train_labels, dtype=np.int64),
        "x_test": np.stack([_decode(f) for f in test_files]),
        "y_test": np.asarray(test_labels, dtype=np.int64),
    }


def load_arrays(folder: Path) -> dict[str, np.ndarray]:
    """The decoded arrays, from the .npy cache next to the folder when it is there."""
    cache = folder.with_name(folder.name + ".fedbench-cache")
    if all((cache / f"{k}.npy").is_file() for k in ARRAYS):
        return {k: np.load(cache / f"{k}.npy") for k in ARRAYS}
    arrays = read_folder(folder)
    try:
        cache.mkdir(exist_ok=True)
        for key, value in arrays.items():
            np.save(cache / f"{key}.npy", value)
    except OSError:  # a read-only data folder: decode again next time
        pass
    return arrays


def find_folder(cfg: DataConfig) -> Path:
    if cfg.path == "miniature":
        from fedbench.data.miniature import write_tiny_imagenet

        return write_tiny_imagenet(data_root(cfg) / "miniature")
    folder = Path(cfg.path).expanduser() if cfg.path else data_root(cfg) / FOLDER
    if not (folder / "wnids.txt").is_file():
        raise FedbenchError(
            f"dataset tinyimagenet not found (no {folder}/wnids.txt); download "
            "http://cs231n.stanford.edu/tiny-imagenet-200.zip, unzip it so that "
            f"{FOLDER}/ lies under data.root, or pass --set data.path=/path/to/{FOLDER}"
        )
    return folder


@DATASETS.register("tinyimagenet")
def tinyimagenet(cfg: DataConfig) -> Dataset:
    """Tiny-ImageNet: 100000/10000 64x64 colour images, 200 classes (folder, cached as uint8)."""
    folder = find_folder(cfg)
    arrays = load_arrays(folder)
    classes = len((folder / "wnids.txt").read_text().split())
    to_float = normalise_uint8(IMAGENET_MEAN, IMAGENET_STD)
    return Dataset(
        name="tinyimagenet",
        x_train=torch.from_numpy(arrays["x_train"]),
        y_train=torch.from_numpy(arrays["y_train"]),
        x_test=torch.from_numpy(arrays["x_test"]),
        y_test=torch.from_numpy(arrays["y_test"]),
        num_classes=classes,
        augment=random_resized_crop_flip(to_float) if cfg.augment else None,
        prepare=to_float,
    )
