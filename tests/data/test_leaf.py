"""LEAF datasets: the JSON layout, user selection, per-user test splits, the memory-mapped cache,
and natural clients end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fedbench.config import DataConfig, PartitionConfig, UsersConfig
from fedbench.data import load_dataset
from fedbench.data.leaf import LEAF_LETTERS, _letters, select_users
from fedbench.data.leaf_sample import write_leaf
from fedbench.data.partition import partition
from fedbench.errors import FedbenchError


def _write_json(folder: Path, split: str, users: dict[str, dict]) -> None:
    out = folder / "data" / split
    out.mkdir(parents=True, exist_ok=True)
    content = {
        "users": list(users),
        "num_samples": [len(u["y"]) for u in users.values()],
        "user_data": users,
    }
    (out / f"{split}.json").write_text(json.dumps(content))


def test_femnist_users_and_their_own_test_split(tmp_path: Path) -> None:
    folder = tmp_path / "leaf" / "femnist"
    pixel = [0.0] * 783 + [1.0]
    train = {
        "a": {"x": [pixel] * 3, "y": [1, 2, 3]},
        "b": {"x": [pixel], "y": [4]},
        "c": {"x": [[0.5] * 784] * 2, "y": [5, 6]},
    }
    test = {"c": {"x": [pixel], "y": [7]}, "a": {"x": [pixel] * 2, "y": [8, 9]}}
    _write_json(folder, "train", train)
    _write_json(folder, "test", test)
    data = load_dataset(DataConfig(name="femnist", root=str(tmp_path)))
    assert data.num_classes == 62 and data.x_train.dtype == torch.uint8
    assert data.y_train.tolist() == [1, 2, 3, 4, 5, 6]
    assert data.client_train.tolist() == [0, 0, 0, 1, 2, 2]
    # test samples grouped by the kept users' order (a, b, c); b has none
    assert data.y_test.tolist() == [8, 9, 7]
    assert [t.tolist() for t in data.client_test] == [[0, 1], [], [2]]
    assert data.x_train[0, 0, 27, 27] == 255 and data.x_train[4, 0, 0, 0] == 128
    assert torch.equal(data.prepare(data.x_train[:1]).reshape(-1)[-1], torch.tensor(1.0))
    parts = partition(
        data.y_train.numpy(), PartitionConfig(kind="natural", clients=3), 62, data.client_train
    )
    assert [p.tolist() for p in parts] == [[0, 1, 2], [3], [4, 5]]
    # min_samples drops b; the cache for that selection is a different folder
    kept = load_dataset(
        DataConfig(name="femnist", root=str(tmp_path), users=UsersConfig(min_samples=2))
    )
    assert kept.y_train.tolist() == [1, 2, 3, 5, 6] and len(kept.client_test) == 2
    assert len(list((folder / "fedbench-cache").iterdir())) == 2


def test_select_users_fraction_count_and_errors() -> None:
    names = [f"u{i}" for i in range(10)]
    counts = [5, 1, 5, 5, 0, 5, 5, 5, 5, 5]
    assert select_users(names, counts, UsersConfig(min_samples=2)) == [
        n for n, c in zip(names, counts) if c >= 2
    ]
    half = select_users(names, counts, UsersConfig(min_samples=2, fraction=0.5, seed=1))
    assert len(half) == 4 and half == sorted(half, key=names.index)
    assert half == select_users(names, counts, UsersConfig(min_samples=2, fraction=0.5, seed=1))
    assert len(select_users(names, counts, UsersConfig(count=3))) == 3
    with pytest.raises(FedbenchError, match=r"data\.users\.count"):
        select_users(names, counts, UsersConfig(count=10))


def test_shakespeare_codes_and_missing_folder_error(tmp_path: Path) -> None:
    assert len(LEAF_LETTERS) == 80
    assert _letters("a\n}").tolist() == [LEAF_LETTERS.index("a"), 0, 79]
    assert _letters("é").tolist() == [LEAF_LETTERS.index(" ")]  # outside the alphabet
    with pytest.raises(FedbenchError, match=r"data/train/\*\.json"):
        load_dataset(DataConfig(name="shakespeare", root=str(tmp_path)))


def test_generated_sample_folders_load_for_all_three(tmp_path: Path) -> None:
    for name, shape in (("femnist", (1, 28, 28)), ("shakespeare", (80,)), ("celeba", (3, 84, 84))):
        write_leaf(tmp_path / name, name, users=3, train=4, test=2, files=2, seed=1)
        data = load_dataset(DataConfig(name=name, path=str(tmp_path / name)))
        assert data.input_shape == shape and data.n_train == 12 and len(data.y_test) == 6
        assert [len(t) for t in data.client_test] == [2, 2, 2]
        assert np.array_equal(np.unique(data.client_train), [0, 1, 2])


@pytest.mark.slow
def test_natural_leaf_run_end_to_end(tmp_path: Path) -> None:
    from fedbench.config import parse_run_config
    from fedbench.engine import train

    cfg = parse_run_config(
        {
            "data": {"name": "femnist", "root": str(tmp_path), "path": "sample"},
            "partition": {"kind": "natural", "clients": 12},
            "model": {"name": "logreg"},
            "fl": {"rounds": 2, "participation": 0.25, "local_steps": 2, "batch_size": 8},
            "algorithm": {"name": "fedavg"},
            "eval": {"every": 1, "train_subset": 50, "target": 0.0},
        }
    )
    result = train(cfg, tmp_path / "out")
    assert result.status == "completed"
    assert result.summary["rounds_to_target"] == 0  # the initial evaluation already reaches 0%
    lines = (result.run_dir / "partition.json").read_text().splitlines()
    assert len(lines) == 12 + 2 and json.loads("".join(lines))["clients"][0]["n"] == 24
