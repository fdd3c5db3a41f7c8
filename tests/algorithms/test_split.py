"""The split-model rule pieces (fedbench.algorithms.split), on tiny float64 tensors with the
numbers written out."""

import pytest
import torch

from fedbench.algorithms import ALGORITHMS
from fedbench.algorithms.split import (
    SplitMethod,
    fedrep_phase,
    head_steps,
    mask_of,
    masked_sgd_step_,
    pick,
)

F64 = torch.float64


def t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=F64)


def test_masked_sgd_step_updates_only_the_trained_tensors_by_hand() -> None:
    # trained tensor: 2.0 - 0.1 * (0.5 + 0.01 * 2.0) = 1.948; -1.0 - 0.1*(-3.0 + 0.01*-1.0) = -0.699
    y = [t(2.0, -1.0), t(4.0)]
    g = [t(0.5, -3.0), t(8.0)]
    masked_sgd_step_(y, g, (True, False), lr=0.1, weight_decay=0.01)
    torch.testing.assert_close(y[0], t(1.948, -0.699), atol=1e-15, rtol=0)
    assert y[1].item() == 4.0  # frozen: no gradient step and no weight decay


def test_masked_sgd_step_with_a_tensor_lr() -> None:
    y = [t(2.0), t(4.0)]
    masked_sgd_step_(
        y, [t(1.0), t(1.0)], (False, True), lr=torch.tensor(0.5, dtype=F64), weight_decay=0.0
    )
    assert [v.item() for v in y] == [2.0, 3.5]


def test_masked_sgd_step_on_stacked_rows_is_each_row_alone() -> None:
    # two clients as rows (leading dim): each row steps as its own client would
    y = [torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=F64), torch.tensor([[5.0], [6.0]], dtype=F64)]
    g = [torch.tensor([[1.0, 1.0], [2.0, 2.0]], dtype=F64), torch.ones(2, 1, dtype=F64)]
    masked_sgd_step_(y, g, (True, False), lr=0.5, weight_decay=0.0)
    assert y[0].tolist() == [[0.5, 1.5], [2.0, 3.0]]
    assert y[1].tolist() == [[5.0], [6.0]]


@pytest.mark.parametrize(
    ("k_total", "h", "b", "expected"),
    [(110, 10, 1, 100), (50, 10, 1, 45), (5, 10, 1, 4), (1, 10, 1, 0), (7, 1, 0, 7), (7, 0, 3, 0)],
)
def test_head_steps_floor_of_the_epoch_ratio(k_total: int, h: int, b: int, expected: int) -> None:
    assert head_steps(k_total, h, b) == expected


def test_head_steps_refuses_no_epochs() -> None:
    with pytest.raises(ValueError, match="positive"):
        head_steps(10, 0, 0)


def test_fedrep_phases_in_both_orders() -> None:
    # K = 5, h:b = 3:2 -> K_h = 3
    head_first = [fedrep_phase(k, 5, 3, 2, "head_first") for k in range(1, 6)]
    body_first = [fedrep_phase(k, 5, 3, 2, "body_first") for k in range(1, 6)]
    assert head_first == ["head", "head", "head", "body", "body"]
    assert body_first == ["body", "body", "head", "head", "head"]


def test_masks() -> None:
    names = ["conv.weight", "fc.weight", "fc.bias"]
    mask = mask_of(names, {"fc.weight", "fc.bias"})
    assert mask == (False, True, True)
    a, b, c = t(1.0), t(2.0), t(3.0)
    picked = pick([a, b, c], mask)
    assert len(picked) == 2 and picked[0] is b and picked[1] is c
    with pytest.raises(ValueError, match=r"fc\.scale"):
        mask_of(names, {"fc.scale"})
    with pytest.raises(ValueError, match="2 tensors but a mask of 3"):
        pick([t(1.0), t(2.0)], mask)


def test_the_five_methods_are_registered_with_their_papers_defaults() -> None:
    for name in ("fedper", "fedrep", "lg_fedavg", "fedbn", "fedbabu"):
        cls = ALGORITHMS.get(name)
        assert issubclass(cls, SplitMethod)
        p = cls.Params()
        assert (p.lr, p.weight_decay, p.finetune_steps, p.finetune_lr) == (0.1, 1e-3, 10, None)
    fedrep = ALGORITHMS.get("fedrep").Params()
    assert (fedrep.head_epochs, fedrep.body_epochs, fedrep.order) == (10, 1, "head_first")
    assert ALGORITHMS.get("fedbabu").Params().finetune == "full"
    # a DP twin where the rule is stated (docs/personalised.md); none for FedBN (BatchNorm)
    assert {f"dp_{n}" in ALGORITHMS for n in ("fedper", "fedrep", "lg_fedavg", "fedbabu")} == {True}
    assert "dp_fedbn" not in ALGORITHMS
