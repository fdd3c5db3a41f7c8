"""breast_cancer: the registered tabular dataset loads offline as a fixed stratified split, is
listed, and a tiny federation learns it."""

import json

import torch

from fedbench.config import DataConfig
from fedbench.data import DATASETS, load_dataset


def test_breast_cancer_is_a_stratified_standardised_split() -> None:
    assert "breast_cancer" in DATASETS
    data = load_dataset(DataConfig(name="breast_cancer"))
    assert (data.n_train, len(data.y_test), data.num_classes) == (455, 114, 2)
    assert data.input_shape == (30,)
    # 212 malignant (0) / 357 benign (1), split 80/20 within each class
    assert torch.bincount(data.y_train).tolist() == [170, 285]
    assert torch.bincount(data.y_test).tolist() == [42, 72]
    assert torch.allclose(data.x_train.mean(dim=0), torch.zeros(30), atol=1e-5)
    assert torch.allclose(data.x_train.std(dim=0, unbiased=False), torch.ones(30), atol=1e-4)
    again = load_dataset(DataConfig(name="breast_cancer"))
    assert torch.equal(again.x_test, data.x_test)  # the split is fixed


def test_breast_cancer_is_listed_and_learnt(run_cli, tmp_path) -> None:
    code, out, _ = run_cli("list", "datasets")
    assert code == 0 and "breast_cancer" in out
    sets = [
        "data.name=breast_cancer",
        "model.name=logreg",
        "partition.clients=5",
        "fl.rounds=3",
        "fl.local_steps=5",
        "fl.batch_size=16",
        "fl.participation=1.0",
        "algorithm.name=fedavg",
    ]
    code, _, err = run_cli(
        "train", *[a for s in sets for a in ("--set", s)], "--out", str(tmp_path)
    )
    assert code == 0, err
    (run,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["d"] == 30 * 2 + 2
    assert summary["final"]["test_acc"] > 85  # the majority class alone gives 63%
