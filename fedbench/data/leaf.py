"""LEAF datasets with their natural clients (Caldas et al. 2018, "LEAF: A Benchmark for Federated
Settings"): femnist, shakespeare, celeba, read from LEAF's own JSON layout

    <data.root>/leaf/<name>/data/{train,test}/*.json    (or data.path = that <name> folder)

where every file holds {"users": [...], "num_samples": [...], "user_data": {user: {"x", "y"}}}.
Each kept user is one client (`partition.kind: natural`) and its own test data is exposed as
`Dataset.client_test` (LEAF's per-user test split). `data.users` selects users as LEAF's sampler
does: minimum training samples per user, a seeded user fraction, optionally an exact count.

Thousands of clients cost nothing while idle: the first load parses the JSON once, file by file,
into compact arrays (8-bit images, 8-bit character codes) and writes them to a cache folder next
to the data; every run then memory-maps that cache, so start-up reads no sample and the pages of a
client are only touched when it is sampled. Client sample lists are index ranges built on demand.

`data.path: sample` uses a tiny generated LEAF-format folder (fedbench.data.leaf_sample) under
<data.root>/leaf-sample/, written on first use: the quick presets and tests run offline with it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from fedbench.config import DataConfig, UsersConfig
from fedbench.data.base import DATASETS, Dataset, data_root
from fedbench.data.leaf_sample import LEAF_LETTERS, ensure_sample
from fedbench.errors import FedbenchError

#: LEAF resizes CelebA images to 84 x 84 RGB before its CNN.
CELEBA_SIZE = 84
CACHE_VERSION = 1
ARRAYS = ("x_train", "y_train", "client_train", "x_test", "y_test", "client_test")


class UserSlices(Sequence[Tensor]):
    """Client i's sample indices, offsets[i]..offsets[i+1], as a tensor made on access."""

    def __init__(self, offsets: np.ndarray) -> None:
        self.offsets = offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    # An index only, no slices: narrower than Sequence's overloaded __getitem__ (hence ignore).
    def __getitem__(self, i: int) -> Tensor:  # type: ignore[override]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        return torch.arange(int(self.offsets[i]), int(self.offsets[i + 1]))


# --- encoders: LEAF's JSON values -> compact numpy arrays --------------------------------------
def _femnist_x(xs: list[Any], folder: Path) -> np.ndarray:
    # LEAF's FEMNIST values are 8-bit greys scaled to [0, 1]: 8 bits keep them (error <= 1/510).
    grey = np.rint(np.asarray(xs, dtype=np.float32) * 255.0).clip(0, 255).astype(np.uint8)
    return grey.reshape(-1, 1, 28, 28)


_CODES = np.full(0x10000, LEAF_LETTERS.index(" "), dtype=np.uint8)
_CODES[[ord(c) for c in LEAF_LETTERS]] = np.arange(len(LEAF_LETTERS), dtype=np.uint8)


def _letters(text: str) -> np.ndarray:
    """Characters -> LEAF letter indices; a character outside LEAF's alphabet becomes a space."""
    points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    return _CODES[np.minimum(points, 0xFFFF)]


def _shakespeare_x(xs: list[str], folder: Path) -> np.ndarray:
    lengths = {len(x) for x in xs}
    if len(lengths) > 1:
        raise FedbenchError(f"{folder}: shakespeare inputs must all have one length, got {lengths}")
    return _letters("".join(xs)).reshape(len(xs), -1)


def _celeba_images(folder: Path) -> Path:
    for candidate in (folder / "data" / "raw" / "img_align_celeba", folder / "img_align_celeba"):
        if candidate.is_dir():
            return candidate
    raise FedbenchError(
        f"celeba images not found (looked in {folder}/data/raw/img_align_celeba and "
        f"{folder}/img_align_celeba); put CelebA's img_align_celeba folder there"
    )


def _celeba_x(xs: list[str], folder: Path) -> np.ndarray:
    from PIL import Image

    images = _celeba_images(folder)
    out = np.empty((len(xs), 3, CELEBA_SIZE, CELEBA_SIZE), dtype=np.uint8)
    for j, name in enumerate(xs):
        path = images / name
        if not path.is_file():
            raise FedbenchError(f"celeba image {path} listed in the JSON is missing")
        # As LEAF's CelebA loader: resize to 84 x 84, then RGB.
        with Image.open(path) as img:
            rgb = img.resize((CELEBA_SIZE, CELEBA_SIZE)).convert("RGB")
        out[j] = np.asarray(rgb).transpose(2, 0, 1)
    return out


def _labels(ys: list[Any], name: str) -> np.ndarray:
    if name == "shakespeare":
        return _letters("".join(ys)).astype(np.int64)
    return np.asarray(ys, dtype=np.int64).reshape(-1)


ENCODERS: dict[str, Callable[[list[Any], Path], np.ndarray]] = {
    "femnist": _femnist_x,
    "shakespeare": _shakespeare_x,
    "celeba": _celeba_x,
}
CLASSES = {"femnist": 62, "shakespeare": len(LEAF_LETTERS), "celeba": 2}


# --- reading the JSON -------------------------------------------------------------------------
def leaf_folder(cfg: DataConfig, name: str) -> Path:
    if cfg.path == "sample":
        return ensure_sample(data_root(cfg) / "leaf-sample", name)
    if cfg.path:
        return Path(cfg.path).expanduser()
    return data_root(cfg) / "leaf" / name


def _json_files(folder: Path, split: str, name: str) -> list[Path]:
    files = sorted((folder / "data" / split).glob("*.json"))
    if not files:
        raise FedbenchError(
            f"LEAF {name} not found: no {folder}/data/{split}/*.json; run LEAF's preprocessing "
            f"(github.com/TalwalkarLab/leaf, data/{name}) and put its data/ folder in {folder}, "
            "or set data.path to that folder (data.path: sample runs on a tiny generated one)"
        )
    return files


def _read_users(
    files: list[Path], name: str, folder: Path, keep: set[str] | None
) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(user, x, y) for every user in the files (only those in `keep` when given), one file
    in memory at a time."""
    encode = ENCODERS[name]
    for path in files:
        try:
            content = json.loads(path.read_text())
            users, user_data = content["users"], content["user_data"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise FedbenchError(
                f"{path} is not a LEAF JSON file (needs users and user_data): {exc}"
            ) from None
        for user in users:
            if keep is not None and user not in keep:
                continue
            data = user_data[user]
            if len(data["x"]):
                yield user, encode(data["x"], folder), _labels(data["y"], name)


def select_users(names: list[str], counts: list[int], cfg: UsersConfig) -> list[str]:
    """LEAF's user sampling, in the files' order: min_samples, then a seeded fraction, then an
    optional exact count."""
    rng = np.random.default_rng(cfg.seed)
    kept = [u for u, n in zip(names, counts, strict=True) if n >= max(cfg.min_samples, 1)]
    if cfg.fraction < 1.0:
        size = max(1, round(cfg.fraction * len(kept)))
        kept = [kept[i] for i in np.sort(rng.choice(len(kept), size=size, replace=False))]
    if cfg.count is not None:
        if cfg.count > len(kept):
            raise FedbenchError(
                f"data.users.count is {cfg.count} but only {len(kept)} users are left after "
                "min_samples and fraction; lower data.users.count"
            )
        kept = [kept[i] for i in np.sort(rng.choice(len(kept), size=cfg.count, replace=False))]
    if not kept:
        raise FedbenchError("no LEAF user has data.users.min_samples training samples; lower it")
    return kept


def _fingerprint(files: list[Path]) -> list[tuple[str, int, int]]:
    return [(p.name, p.stat().st_size, int(p.stat().st_mtime)) for p in files]


def _write_split(
    out: Path, split: str, users: list[str], parts: dict[str, tuple[np.ndarray, np.ndarray]]
) -> None:
    """Concatenate the kept users' arrays in user order into x_/y_/client_<split>.npy."""
    present = [u for u in users if u in parts]
    total = sum(len(parts[u][1]) for u in present)
    sample_shape = parts[present[0]][0].shape[1:] if present else (0,)
    dtype = parts[present[0]][0].dtype if present else np.uint8
    x = np.lib.format.open_memmap(out / f"x_{split}.npy", "w+", dtype, (total, *sample_shape))
    y = np.empty(total, dtype=np.int64)
    client = np.empty(total, dtype=np.int32)
    index = {u: i for i, u in enumerate(users)}
    at = 0
    for user in present:
        xs, ys = parts.pop(user)
        x[at : at + len(ys)] = xs
        y[at : at + len(ys)] = ys
        client[at : at + len(ys)] = index[user]
        at += len(ys)
    x.flush()
    del x
    np.save(out / f"y_{split}.npy", y)
    np.save(out / f"client_{split}.npy", client)


def build_cache(folder: Path, name: str, users_cfg: UsersConfig) -> Path:
    """The cache folder of this dataset and user selection, written on first use."""
    train_files = _json_files(folder, "train", name)
    test_files = _json_files(folder, "test", name)
    key = json.dumps(
        [CACHE_VERSION, name, users_cfg.model_dump(), _fingerprint(train_files + test_files)]
    )
    cache = folder / "fedbench-cache" / hashlib.sha1(key.encode()).hexdigest()[:12]
    if (cache / "users.json").is_file():
        return cache
    tmp = cache.with_name(f"{cache.name}.tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    train = {u: (x, y) for u, x, y in _read_users(train_files, name, folder, None)}
    users = select_users(list(train), [len(v[1]) for v in train.values()], users_cfg)
    keep = set(users)
    train = {u: v for u, v in train.items() if u in keep}
    _write_split(tmp, "train", users, train)
    test = {u: (x, y) for u, x, y in _read_users(test_files, name, folder, keep)}
    if not test:
        raise FedbenchError(f"LEAF {name}: none of the kept users has test data in {folder}")
    _write_split(tmp, "test", users, test)
    (tmp / "users.json").write_text(json.dumps(users))
    try:
        os.replace(tmp, cache)
    except OSError:  # another worker wrote the same cache first
        shutil.rmtree(tmp, ignore_errors=True)
    return cache


def _offsets(client: np.ndarray, users: int) -> np.ndarray:
    """Samples are stored grouped by user in user order: per-user start offsets."""
    return np.concatenate([[0], np.cumsum(np.bincount(client, minlength=users))])


def _images_to_unit(x: Tensor) -> Tensor:
    """uint8 images -> floats in [0, 1] on the device (float batches pass unchanged)."""
    return x.float().div_(255.0) if x.dtype == torch.uint8 else x


def _codes_to_long(x: Tensor) -> Tensor:
    return x.long()


def load_leaf(cfg: DataConfig, name: str) -> Dataset:
    folder = leaf_folder(cfg, name)
    cache = build_cache(folder, name, cfg.users)
    users = json.loads((cache / "users.json").read_text())
    # Copy-on-write memory maps: nothing is read until a batch indexes it.
    arrays = {key: np.load(cache / f"{key}.npy", mmap_mode="c") for key in ARRAYS}
    client_test = np.asarray(arrays["client_test"])
    return Dataset(
        name=name,
        x_train=torch.from_numpy(arrays["x_train"]),
        y_train=torch.from_numpy(np.asarray(arrays["y_train"])),
        x_test=torch.from_numpy(arrays["x_test"]),
        y_test=torch.from_numpy(np.asarray(arrays["y_test"])),
        num_classes=CLASSES[name],
        client_train=np.asarray(arrays["client_train"]),
        client_test=UserSlices(_offsets(client_test, len(users))),
        prepare=_codes_to_long if name == "shakespeare" else _images_to_unit,
    )


@DATASETS.register("femnist")
def femnist(cfg: DataConfig) -> Dataset:
    """LEAF FEMNIST: 28x28 handwritten characters, 62 classes, one client per writer."""
    return load_leaf(cfg, "femnist")


@DATASETS.register("shakespeare")
def shakespeare(cfg: DataConfig) -> Dataset:
    """LEAF Shakespeare: 80 characters -> the next one (80 symbols), one client per role."""
    return load_leaf(cfg, "shakespeare")


@DATASETS.register("celeba")
def celeba(cfg: DataConfig) -> Dataset:
    """LEAF CelebA: 84x84 RGB faces (img_align_celeba), smiling or not, one client per celebrity."""
    return load_leaf(cfg, "celeba")
