"""data.val_fraction: a validation split held out of the training data, never the test set."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedbench.data.base import Dataset
from fedbench.data.validation import holdout_validation
from fedbench.errors import FedbenchError


def _data(n: int = 50) -> Dataset:
    x = torch.arange(n, dtype=torch.float64).unsqueeze(1)
    return Dataset(
        name="toy",
        x_train=x,
        y_train=torch.arange(n) % 5,
        x_test=torch.full((7, 1), -1.0, dtype=torch.float64),
        y_test=torch.zeros(7, dtype=torch.int64),
        num_classes=5,
        client_train=np.arange(n) % 3,
    )


def test_split_moves_a_seeded_fraction_of_training_samples_to_evaluation() -> None:
    data = holdout_validation(_data(), 0.2, seed=4)
    assert data.n_train == 40 and data.x_test.shape[0] == 10
    train = set(data.x_train.flatten().tolist())
    val = set(data.x_test.flatten().tolist())
    assert not train & val and train | val == set(range(50))  # a partition of the training set
    assert -1.0 not in val  # the test set is gone, not mixed in
    # Labels and natural client ids travel with their samples.
    assert torch.equal(data.y_train, data.x_train.flatten().long() % 5)
    assert np.array_equal(data.client_train, data.x_train.flatten().long().numpy() % 3)
    # Seeded: the same split every time, another one for another seed.
    again = holdout_validation(_data(), 0.2, seed=4)
    other = holdout_validation(_data(), 0.2, seed=5)
    assert torch.equal(again.x_test, data.x_test)
    assert not torch.equal(other.x_test, data.x_test)


def test_zero_fraction_is_the_dataset_itself() -> None:
    data = _data()
    assert holdout_validation(data, 0.0, seed=0) is data


@pytest.mark.parametrize("fraction", [0.001, 0.999])
def test_a_fraction_leaving_an_empty_split_is_a_clear_error(fraction: float) -> None:
    with pytest.raises(FedbenchError, match="val_fraction"):
        holdout_validation(_data(), fraction, seed=0)
