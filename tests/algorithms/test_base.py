"""The Algorithm contract: communication sizes declared once, every hook declared with a default."""

import pytest
import torch

from fedbench.algorithms import ALGORITHMS, Floats, ParamSpec
from fedbench.algorithms.fedavg import FedAvg

SPEC = ParamSpec(names=["w", "b"], shapes=[torch.Size([3, 4]), torch.Size([3])], heads={})


def test_floats_count_and_label() -> None:
    assert str(Floats(d=1)) == "d" and str(Floats(d=2)) == "2d" and str(Floats()) == "0"
    assert str(Floats(d=1) + Floats(blocks=1)) == "d + B"
    assert Floats(d=2, blocks=3).count(d=15, blocks=4) == 42.0


def test_floats_with_the_local_part() -> None:
    # the split-model methods' d - L: what stays on the client is not sent
    assert str(Floats(d=1, local=-1)) == "d - L" and str(Floats(local=-1)) == "-L"
    assert str(Floats(d=2, blocks=1, local=-2)) == "2d + B - 2L"
    assert Floats(d=1, local=-1).count(d=15, blocks=0, local=4) == 11.0
    assert Floats(d=1) + Floats(local=-1) == Floats(d=1, local=-1)


@pytest.mark.parametrize(
    ("name", "label", "up", "down"),
    [
        ("fedavg", "d", 15, 15),
        ("scaffold", "2d", 30, 30),
        ("fedlada", "2d", 30, 45),
        ("fedcm", "d", 15, 30),
        ("fedadamw", "d + B", 15 + 2, 2 * 15 + 2),  # B = 2 tensors under blocks: tensor
        ("dp_fedadamw", "d + B", 15 + 2, 2 * 15 + 2),
    ],
)
def test_label_and_counts_come_from_one_declaration(
    name: str, label: str, up: int, down: int
) -> None:
    cls = ALGORITHMS.get(name)
    alg = cls(cls.Params(), SPEC, num_clients=4)
    assert (cls.comm_up_label, alg.comm_up(), alg.comm_down()) == (label, up, down)


def test_fedadamw_sizes_follow_its_switches() -> None:
    cls = ALGORITHMS.get("fedadamw")
    full = cls(cls.Params(v_agg="full", m_agg=True, alpha=0.0), SPEC, num_clients=4)
    assert (full.comm_up(), full.comm_down()) == (3 * 15, 3 * 15)


def test_setting_a_size_by_hand_is_refused() -> None:
    with pytest.raises(TypeError, match="upload_size"):

        class Bad(FedAvg):
            comm_up_label = "3d"

    with pytest.raises(TypeError, match="upload_size"):

        class AlsoBad(FedAvg):
            def comm_up(self) -> float:
                return 0.0
