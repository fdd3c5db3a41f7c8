"""Generated LEAF-format folders (the real JSON layout, tiny and learnable) for the quick presets,
the tests and the many-clients start-up measurement; no sample comes from the real datasets.

    femnist:     62 classes; each class a fixed random 28x28 stroke pattern, each user a skewed
                 class mix, its own offset and noise; greys on LEAF's 1/255 grid in [0, 1]
    shakespeare: each user ("role") a text from its own first-order Markov chain over LEAF's
                 alphabet; samples = 80-character windows and the next character
    celeba:      24x24 RGB PNG faces-like blobs in raw/img_align_celeba (LEAF resizes them to
                 84x84); label "smiling" = whether the lower half is brighter than the upper half
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

#: LEAF's Shakespeare alphabet (its `ALL_LETTERS`): 80 symbols, the char-LSTM's classes.
LEAF_LETTERS = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"

#: The quick presets' sizes: users, training and test samples per user, files per split.
SAMPLE_SHAPE = {
    "femnist": (12, 24, 6, 2),
    "shakespeare": (8, 60, 15, 2),
    "celeba": (12, 12, 4, 2),
}


def _femnist_users(users: int, n: int, rng: np.random.Generator) -> list[dict[str, list]]:
    protos = (rng.random((62, 28, 28)) < 0.18).astype(np.float32)
    out = []
    for _ in range(users):
        classes = rng.choice(62, size=6, replace=False)
        labels = rng.choice(classes, size=n, p=rng.dirichlet(np.ones(6)))
        offset = rng.normal(0, 0.05)
        x = protos[labels] * 0.8 + offset + rng.normal(0, 0.15, size=(n, 28, 28))
        grey = np.rint(np.clip(1.0 - x, 0.0, 1.0) * 255) / 255  # LEAF: ink dark on white
        out.append({"x": np.round(grey.reshape(n, -1), 4).tolist(), "y": labels.tolist()})
    return out


def _shakespeare_users(users: int, n: int, rng: np.random.Generator) -> list[dict[str, list]]:
    letters = np.array(list(LEAF_LETTERS))
    common = rng.choice(len(letters), size=24, replace=False)
    out = []
    for _ in range(users):
        # A sparse Markov chain over 24 common symbols: predictable from the previous character.
        nxt = rng.choice(common, size=(len(letters), 3))
        state = int(common[0])
        text = []
        for _ in range(n + 80):
            state = int(nxt[state, rng.integers(0, 3)])
            text.append(letters[state])
        s = "".join(text)
        out.append({"x": [s[j : j + 80] for j in range(n)], "y": [s[j + 80] for j in range(n)]})
    return out


def _celeba_users(
    users: int, n: int, rng: np.random.Generator, images: Path, prefix: str
) -> list[dict[str, list]]:
    from PIL import Image

    out: list[dict[str, list]] = []
    for u in range(users):
        tone = rng.uniform(60, 200, size=3)
        names: list[str] = []
        labels: list[int] = []
        for j in range(n):
            smiling = int(rng.random() < 0.5)
            img = np.tile(tone, (24, 24, 1)) + rng.normal(0, 12, size=(24, 24, 3))
            img[12:] += 45 if smiling else -45
            name = f"{prefix}{u:04d}_{j:03d}.png"
            Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(images / name)
            names.append(name)
            labels.append(smiling)
        out.append({"x": names, "y": labels})
    return out


def write_leaf(
    folder: Path,
    name: str,
    *,
    users: int,
    train: int,
    test: int,
    files: int = 2,
    seed: int = 0,
) -> Path:
    """Write <folder>/data/{train,test}/*.json (and celeba's images) in LEAF's layout."""
    rng = np.random.default_rng(seed)
    images = folder / "data" / "raw" / "img_align_celeba"
    if name == "celeba":
        images.mkdir(parents=True, exist_ok=True)
    user_names = [f"f{u:04d}_{seed}" for u in range(users)]
    # One draw per user for train + test, then split: a user's test data follows its own
    # distribution, as in LEAF.
    n = train + test
    if name == "femnist":
        records = _femnist_users(users, n, rng)
    elif name == "shakespeare":
        records = _shakespeare_users(users, n, rng)
    else:
        records = _celeba_users(users, n, rng, images, "img_")
    per_split: dict[str, list[dict[str, Any]]] = {
        "train": [{k: v[:train] for k, v in r.items()} for r in records],
        "test": [{k: v[train:] for k, v in r.items()} for r in records],
    }
    for split, records in per_split.items():
        out = folder / "data" / split
        out.mkdir(parents=True, exist_ok=True)
        for f, chunk in enumerate(np.array_split(np.arange(users), files)):
            names = [user_names[u] for u in chunk]
            content = {
                "users": names,
                "num_samples": [len(records[u]["y"]) for u in chunk],
                "user_data": {user_names[u]: records[u] for u in chunk},
            }
            path = out / f"all_data_{f}_niid_0_keep_0_{split}_9.json"
            path.write_text(json.dumps(content, separators=(",", ":")))
    return folder


def ensure_sample(root: Path, name: str) -> Path:
    """The quick presets' generated folder root/<name>, written once (atomically)."""
    folder = root / name
    if (folder / "data" / "test").is_dir():
        return folder
    users, train, test, files = SAMPLE_SHAPE[name]
    tmp = root / f".{name}.tmp{os.getpid()}"
    write_leaf(tmp, name, users=users, train=train, test=test, files=files, seed=0)
    try:
        os.replace(tmp, folder)
    except OSError:  # written by a parallel worker meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
