"""Datasets: the embedded digits split, npz as given, synthetic, missing files as clean errors."""

import numpy as np
import pytest
import torch

from fedbench.config import DataConfig
from fedbench.data import DATASETS, load_dataset
from fedbench.data.augment import random_crop_flip
from fedbench.data.sampler import batch_indices, client_seed
from fedbench.errors import FedbenchError


def test_digits_split_and_normalisation():
    ds = load_dataset(DataConfig(name="digits"))
    assert ds.x_train.shape == (1437, 1, 8, 8) and ds.x_test.shape == (360, 1, 8, 8)
    assert ds.num_classes == 10
    assert abs(float(ds.x_train.mean())) < 1e-5 and abs(float(ds.x_train.std()) - 1) < 1e-3
    # stratified: every class in the test set with 36 +- 1 samples
    counts = torch.bincount(ds.y_test, minlength=10)
    assert int(counts.min()) >= 35 and int(counts.max()) <= 37
    again = load_dataset(DataConfig(name="digits"))
    assert torch.equal(ds.x_test, again.x_test)


def test_npz_used_exactly_as_given(tmp_path):
    path = tmp_path / "d.npz"
    x = np.arange(24, dtype=np.float32).reshape(6, 4) * 10
    np.savez(
        path,
        x_train=x,
        y_train=np.array([0, 1, 2, 0, 1, 4]),
        x_test=x[:2],
        y_test=np.array([0, 1]),
        client_train=np.array([0, 0, 1, 1, 2, 2]),
    )
    ds = load_dataset(DataConfig(name="npz", path=str(path)))
    assert torch.equal(ds.x_train, torch.from_numpy(x))
    assert ds.num_classes == 5 and ds.augment is None
    assert ds.client_train.tolist() == [0, 0, 1, 1, 2, 2]


def test_npz_errors(tmp_path):
    with pytest.raises(FedbenchError, match="not found"):
        load_dataset(DataConfig(name="npz", path=str(tmp_path / "missing.npz")))
    np.savez(tmp_path / "bad.npz", x_train=np.zeros((2, 2)))
    with pytest.raises(FedbenchError, match="lacks y_train"):
        load_dataset(DataConfig(name="npz", path=str(tmp_path / "bad.npz")))
    with pytest.raises(FedbenchError, match=r"needs data\.path"):
        load_dataset(DataConfig(name="npz"))


def test_synthetic_is_seeded():
    a, b = load_dataset(DataConfig(name="synthetic")), load_dataset(DataConfig(name="synthetic"))
    assert a.x_train.shape == (2000, 32) and torch.equal(a.x_train, b.x_train)


def test_missing_cifar_offline_names_paths(tmp_path):
    with pytest.raises(FedbenchError) as info:
        load_dataset(DataConfig(name="cifar100", root=str(tmp_path), download=False))
    msg = str(info.value)
    assert "cifar100" in msg and str(tmp_path) in msg and "\n" not in msg


def test_fmnist_from_idx_files(tmp_path, monkeypatch):
    """Real IDX format, written here: loads from data.root/FashionMNIST/raw."""
    import gzip

    import fedbench.data.vision as vision

    monkeypatch.setattr(vision, "DEBIAN_FMNIST", tmp_path / "nowhere")
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)

    def write(name, arr):
        header = bytes([0, 0, 8, arr.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
        with gzip.open(raw / f"{name}.gz", "wb") as fh:
            fh.write(header + arr.astype(np.uint8).tobytes())

    imgs = np.random.default_rng(0).integers(0, 256, size=(5, 28, 28))
    for split, n in (("train", 5), ("t10k", 3)):
        write(f"{split}-images-idx3-ubyte", imgs[:n])
        write(f"{split}-labels-idx1-ubyte", np.arange(n) % 10)
    ds = load_dataset(DataConfig(name="fmnist", root=str(tmp_path), download=False))
    assert ds.x_train.shape == (5, 1, 28, 28) and ds.y_test.tolist() == [0, 1, 2]
    expected = (imgs[0] / 255.0 - 0.2860) / 0.3530
    np.testing.assert_allclose(ds.x_train[0, 0].numpy(), expected, atol=1e-5)
    (raw / "train-images-idx3-ubyte.gz").unlink()
    with pytest.raises(FedbenchError, match="dataset-fashion-mnist"):
        load_dataset(DataConfig(name="fmnist", root=str(tmp_path), download=False))


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_a_set_data_root_that_does_not_exist_is_an_error_for_every_dataset(name, tmp_path):
    """Fashion-MNIST used to fall back to Debian's copy, train, and record the missing root."""
    missing = tmp_path / "nowhere"
    with pytest.raises(FedbenchError) as info:
        load_dataset(DataConfig(name=name, root=str(missing), download=False))
    msg = str(info.value)
    assert f"data.root {missing} does not exist" in msg and "\n" not in msg
    (tmp_path / "file").write_text("")
    with pytest.raises(FedbenchError, match="is not a folder"):
        load_dataset(DataConfig(name=name, root=str(tmp_path / "file"), download=False))


def test_fmnist_searches_only_a_set_root(tmp_path, monkeypatch):
    """Debian's copy stands in for the default root only: a set root without the files is
    'not found', naming the root, not a silent read of /usr/share/datasets."""
    import fedbench.data.vision as vision

    debian = tmp_path / "debian"
    debian.mkdir()
    for stem in vision.FMNIST_FILES.values():
        (debian / stem).write_bytes(b"")
    monkeypatch.setattr(vision, "DEBIAN_FMNIST", debian)
    (tmp_path / "mine").mkdir()
    with pytest.raises(FedbenchError) as info:
        load_dataset(DataConfig(name="fmnist", root=str(tmp_path / "mine"), download=False))
    assert str(tmp_path / "mine") in str(info.value) and str(debian) not in str(info.value)


def test_batch_indices_without_replacement_within_epoch():
    samples = torch.arange(100, 110)
    gen = torch.Generator().manual_seed(client_seed(0, 1, 2))
    order = batch_indices(samples, 5, 3, gen)
    assert order.shape == (5, 3)
    epoch1 = torch.cat([order[k] for k in range(3)])  # 10 // 3 = 3 batches per epoch
    assert len(set(epoch1.tolist())) == 9 and set(epoch1.tolist()) <= set(range(100, 110))
    full = batch_indices(samples, 4, 0, gen)
    assert full.shape == (4, 10)
    assert client_seed(0, 1, 2) != client_seed(0, 2, 1)


def test_random_crop_flip_shifts_within_padding():
    x = torch.arange(2 * 1 * 4 * 4, dtype=torch.float32).reshape(2, 1, 4, 4)
    aug = random_crop_flip(1, pad_value=torch.tensor([-5.0]))
    out = aug(x, torch.Generator().manual_seed(0))
    assert out.shape == x.shape
    # every output value is either a pixel of the same image or the pad value
    for i in range(2):
        assert set(out[i].flatten().tolist()) <= set(x[i].flatten().tolist()) | {-5.0}


def test_a_wrong_data_root_names_the_location_fedbench_would_use_instead(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDBENCH_DATA", str(tmp_path / "shared"))
    with pytest.raises(FedbenchError) as info:
        load_dataset(DataConfig(name="digits", root=str(tmp_path / "typo"), download=False))
    assert f"drop data.root to read {(tmp_path / 'shared').resolve()} ($FEDBENCH_DATA;" in str(
        info.value
    )
    monkeypatch.delenv("FEDBENCH_DATA")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with pytest.raises(FedbenchError) as info:
        load_dataset(DataConfig(name="digits", root=str(tmp_path / "typo"), download=False))
    default = (tmp_path / "home" / ".cache" / "fedbench" / "data").resolve()
    assert f"drop data.root to read {default} (the default;" in str(info.value)


def test_digits_equal_scikit_learns_own_split_bitwise():
    """The loader reads scikit-learn's digits file without importing scikit-learn and takes the
    shipped split: the tensors are those of `load_digits` + `train_test_split` (the loader of
    fedbench 0.x), bit for bit, and so the golden runs on digits stand."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    x = bunch.images.astype(np.float32) / 16.0
    y = bunch.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.2, stratify=y, random_state=0)
    mean, std = float(x_tr.mean()), float(x_tr.std())
    ds = load_dataset(DataConfig(name="digits"))
    assert torch.equal(ds.x_train, torch.from_numpy((x_tr - mean) / std).unsqueeze(1))
    assert torch.equal(ds.x_test, torch.from_numpy((x_te - mean) / std).unsqueeze(1))
    assert ds.y_train.tolist() == y_tr.tolist() and ds.y_test.tolist() == y_te.tolist()
    assert ds.y_train.dtype == torch.int64 and ds.x_train.dtype == torch.float32


def test_loading_digits_does_not_import_scikit_learn():
    import subprocess
    import sys

    code = (
        "import sys; from fedbench.config import DataConfig; from fedbench.data import "
        "load_dataset; load_dataset(DataConfig(name='digits')); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_digits_without_scikit_learns_file_load_through_scikit_learn(monkeypatch):
    """Where scikit-learn keeps no digits.csv.gz (another layout), `load_digits` gives the rows."""
    from fedbench.data import embedded

    fast = load_dataset(DataConfig(name="digits"))
    monkeypatch.setattr(embedded.importlib.util, "find_spec", lambda name: None)
    slow = load_dataset(DataConfig(name="digits"))
    assert torch.equal(fast.x_train, slow.x_train) and torch.equal(fast.y_test, slow.y_test)
