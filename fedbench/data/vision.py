"""Image datasets through torchvision's files: Fashion-MNIST, CIFAR-10, CIFAR-100.

Images are decoded once into normalised float tensors (CIFAR's pickled batches through an
unpickler that builds numpy arrays and nothing else); CIFAR trains with random crop 32 (pad 4)
and horizontal flip on tensors. Fashion-MNIST is also found where Debian's
`dataset-fashion-mnist` package installs it, unless data.root is set (a set root is the only
place searched). A dataset that is absent and cannot be downloaded
is a one-line error naming the paths searched and how to provide the files.
"""

from __future__ import annotations

import gzip
import pickle
import socket
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from fedbench.config import DataConfig
from fedbench.data.augment import random_crop_flip
from fedbench.data.base import DATASETS, Dataset, data_root
from fedbench.errors import FedbenchError

DEBIAN_FMNIST = Path("/usr/share/datasets/fashion-mnist")
FMNIST_FILES = {
    "x_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "x_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}
STATS = {
    "fmnist": ((0.2860,), (0.3530,)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
}
DOWNLOAD_TIMEOUT_S = 30


def _missing(name: str, searched: list[Path], how: str, downloaded: bool) -> FedbenchError:
    paths = ", ".join(str(p) for p in searched)
    tried = " and it could not be downloaded" if downloaded else ""
    return FedbenchError(f"dataset {name} not found (searched {paths}){tried}; {how}")


def _normalise(images: np.ndarray, name: str) -> torch.Tensor:
    """uint8 N x H x W (x C) -> float N x C x H x W, scaled to [0, 1] and normalised."""
    x = torch.from_numpy(images).float().div_(255.0)
    x = x.unsqueeze(1) if x.ndim == 3 else x.permute(0, 3, 1, 2)
    mean, std = (torch.tensor(v).view(1, -1, 1, 1) for v in STATS[name])
    return ((x - mean) / std).contiguous()


def _pad_value(name: str) -> torch.Tensor:
    mean, std = (torch.tensor(v) for v in STATS[name])
    return -mean / std


def _download(fn: Callable[[], object]) -> bool:
    """Run a torchvision download with a timeout; False when the network is unreachable."""
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)
    try:
        fn()
        return True
    except Exception:  # any network or integrity failure means "not available offline"
        return False
    finally:
        socket.setdefaulttimeout(previous)


def _read_idx(path: Path) -> np.ndarray:
    """An IDX file (gzipped or not), the format of (Fashion-)MNIST."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        raw = fh.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims).copy()


def _find_idx_folder(candidates: list[Path]) -> Path | None:
    for folder in candidates:
        if all(
            (folder / f).is_file() or (folder / f"{f}.gz").is_file() for f in FMNIST_FILES.values()
        ):
            return folder
    return None


def _idx(folder: Path, stem: str) -> np.ndarray:
    plain = folder / stem
    return _read_idx(plain if plain.is_file() else folder / f"{stem}.gz")


@DATASETS.register("fmnist")
def fmnist(cfg: DataConfig) -> Dataset:
    """Fashion-MNIST: 60000/10000 28x28 greyscale images, 10 classes (also from Debian's package)."""
    root = data_root(cfg)
    candidates = [root / "FashionMNIST" / "raw", root / "fashion-mnist", root]
    if cfg.root is None:  # Debian's copy stands in for the default root, never for a set one
        candidates.append(DEBIAN_FMNIST)
    folder = _find_idx_folder(candidates)
    if folder is None and cfg.download:
        from torchvision.datasets import FashionMNIST

        if _download(lambda: FashionMNIST(str(root), train=True, download=True)):
            folder = _find_idx_folder(candidates)
    if folder is None:
        raise _missing(
            "fmnist",
            candidates,
            "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or put "
            "the four *-idx*-ubyte.gz files under data.root/FashionMNIST/raw",
            cfg.download,
        )
    arrays = {key: _idx(folder, stem) for key, stem in FMNIST_FILES.items()}
    return Dataset(
        name="fmnist",
        x_train=_normalise(arrays["x_train"], "fmnist"),
        y_train=torch.from_numpy(arrays["y_train"].astype(np.int64)),
        x_test=_normalise(arrays["x_test"], "fmnist"),
        y_test=torch.from_numpy(arrays["y_test"].astype(np.int64)),
        num_classes=10,
        source=str(folder.resolve()),
    )


#: The files of torchvision's "python version" of CIFAR: (folder, train files, test file, label key).
CIFAR_FILES = {
    "cifar10": (
        "cifar-10-batches-py",
        [f"data_batch_{i}" for i in range(1, 6)],
        "test_batch",
        "labels",
        10,
    ),
    "cifar100": ("cifar-100-python", ["train"], "test", "fine_labels", 100),
}
#: What a CIFAR batch file may construct when unpickled: numpy arrays and Python 2 strings. A
#: file asking for anything else is refused (the files come from a download, so they are not
#: trusted to run code).
_CIFAR_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}


class _CifarUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> object:
        if (module, name) not in _CIFAR_GLOBALS:
            raise pickle.UnpicklingError(f"unexpected object {module}.{name}")
        return super().find_class(module, name)


def read_cifar_batch(path: Path, label_key: str) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR batch file: uint8 images (N, 32, 32, 3) and int64 labels."""
    with open(path, "rb") as fh:
        entry = _CifarUnpickler(fh, encoding="latin1").load()
    if not isinstance(entry, dict) or "data" not in entry or label_key not in entry:
        raise ValueError(f"{path.name} holds no 'data' and '{label_key}'")
    data = np.asarray(entry["data"], dtype=np.uint8)
    labels = np.asarray(entry[label_key], dtype=np.int64)
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(labels) != len(data):
        raise ValueError(f"{path.name}: {data.shape} images for {len(labels)} labels")
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), labels


def write_cifar(
    root: Path, name: str, train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray]
) -> Path:
    """root/<folder> in torchvision's python-version layout from uint8 (N, 32, 32, 3) images and
    labels (generated data for `--smoke` and tests); the training set is split over the files."""
    folder_name, train_files, test_file, label_key, _ = CIFAR_FILES[name]
    folder = Path(root) / folder_name
    folder.mkdir(parents=True, exist_ok=True)
    parts = np.array_split(np.arange(len(train[0])), len(train_files))
    for file, part in [*zip(train_files, parts, strict=True), (test_file, None)]:
        images, labels = (train[0][part], train[1][part]) if part is not None else test
        entry = {
            "data": images.transpose(0, 3, 1, 2).reshape(len(images), -1),
            label_key: [int(v) for v in labels],
        }
        with open(folder / file, "wb") as fh:
            pickle.dump(entry, fh, protocol=2)
    return folder


def _cifar(cfg: DataConfig, name: str) -> Dataset:
    folder_name, train_files, test_file, label_key, classes = CIFAR_FILES[name]
    root = data_root(cfg)
    folder = root / folder_name
    if not folder.is_dir() and cfg.download:
        from torchvision.datasets import CIFAR10, CIFAR100

        cls = CIFAR10 if name == "cifar10" else CIFAR100
        _download(lambda: cls(str(root), train=True, download=True))
    if not folder.is_dir():
        raise _missing(
            name,
            [folder],
            f"download the CIFAR python version and extract {folder_name}/ under {root} "
            "(or set data.root to the folder that holds it)",
            cfg.download,
        )
    try:
        parts = [read_cifar_batch(folder / f, label_key) for f in train_files]
        x_test, y_test = read_cifar_batch(folder / test_file, label_key)
    except (OSError, ValueError, EOFError, pickle.UnpicklingError) as exc:
        raise FedbenchError(
            f"dataset {name} in {folder} is incomplete or corrupted ({exc}); extract it again"
        ) from None
    x_train = np.concatenate([p[0] for p in parts])
    y_train = np.concatenate([p[1] for p in parts])
    if (
        min(y_train.min(initial=0), y_test.min(initial=0)) < 0
        or max(y_train.max(initial=0), y_test.max(initial=0)) >= classes
    ):
        raise FedbenchError(
            f"dataset {name} in {folder} has labels outside 0..{classes - 1}; extract it again"
        )
    augment = random_crop_flip(4, _pad_value(name)) if cfg.augment else None
    return Dataset(
        name=name,
        x_train=_normalise(x_train, name),
        y_train=torch.from_numpy(y_train),
        x_test=_normalise(x_test, name),
        y_test=torch.from_numpy(y_test),
        num_classes=classes,
        augment=augment,
    )


@DATASETS.register("cifar10")
def cifar10(cfg: DataConfig) -> Dataset:
    """CIFAR-10 (torchvision's python version): 50000/10000 32x32 colour images, 10 classes."""
    return _cifar(cfg, "cifar10")


@DATASETS.register("cifar100")
def cifar100(cfg: DataConfig) -> Dataset:
    """CIFAR-100 (torchvision's python version): 50000/10000 32x32 colour images, 100 classes."""
    return _cifar(cfg, "cifar100")
