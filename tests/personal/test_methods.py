"""Local-only and FedAvg-FT, computed by hand in float64 (numbers written out)."""

from __future__ import annotations

import torch

from fedbench.algorithms import ALGORITHMS, ParamSpec, RoundInfo
from fedbench.algorithms.fedavg import FedAvg, FedAvgConfig
from fedbench.algorithms.personal import PERSONAL, FineTuning
from fedbench.personal.methods.fedavg_ft import FedAvgFT, FedAvgFTConfig
from fedbench.personal.methods.local_only import LocalOnly, LocalOnlyConfig

SPEC = ParamSpec(
    names=["w", "b"],
    shapes=[torch.Size([2]), torch.Size([1])],
    heads={},
    head_params=frozenset({"b"}),
)
INFO = RoundInfo(0, 0.1, 1, 4, 2)


def t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def x0() -> list[torch.Tensor]:
    return [t(1.0, -2.0), t(0.5)]


def grad() -> list[torch.Tensor]:
    return [t(0.2, 0.4), t(-1.0)]


def test_registered() -> None:
    assert ALGORITHMS.get("local_only") is LocalOnly
    assert ALGORITHMS.get("fedavg_ft") is FedAvgFT
    assert LocalOnly.comm_up_label == "0" and FedAvgFT.comm_up_label == "d"


def test_local_only_round_by_hand() -> None:
    """y <- v_i; y <- y - eta (g + lambda y); v_i <- y; Delta_i = 0."""
    alg = LocalOnly(LocalOnlyConfig(lr=0.1, weight_decay=0.01), SPEC, num_clients=4)
    assert alg.personal_index == [0, 1]
    x = [t(9.0, 9.0), t(9.0)]
    stored = {PERSONAL: x0()}
    y = [v.clone() for v in x]  # the engine copied x in
    local = alg.client_begin(x, {}, stored, INFO)
    alg.load_client(y, [], stored)
    assert torch.equal(y[0], t(1.0, -2.0)) and torch.equal(y[1], t(0.5))
    alg.local_step(y, grad(), local, 1, INFO)
    # w: 1 - 0.1 (0.2 + 0.01*1) = 0.979;  -2 - 0.1 (0.4 - 0.02) = -2.038
    # b: 0.5 - 0.1 (-1 + 0.005) = 0.5995
    torch.testing.assert_close(y[0], t(0.979, -2.038), rtol=0, atol=1e-15)
    torch.testing.assert_close(y[1], t(0.5995), rtol=0, atol=1e-15)
    upload, state = alg.client_end(y, x, local, stored, INFO)
    assert all(torch.equal(d, torch.zeros_like(d)) for d in upload["delta"])
    assert state is not None
    torch.testing.assert_close(state[PERSONAL][0], t(0.979, -2.038), rtol=0, atol=1e-15)
    assert state[PERSONAL][0].data_ptr() != y[0].data_ptr()  # a copy, not the live weights


def test_local_only_new_client_starts_from_x() -> None:
    alg = LocalOnly(LocalOnlyConfig(), SPEC, num_clients=4)
    y = x0()
    alg.load_client(y, [], None)
    assert torch.equal(y[0], t(1.0, -2.0)) and torch.equal(y[1], t(0.5))


def test_fedavg_ft_trains_as_fedavg() -> None:
    """The same local step and upload as FedAvg, no stored state."""
    ft = FedAvgFT(FedAvgFTConfig(lr=0.1, weight_decay=0.01), SPEC, num_clients=4)
    avg = FedAvg(FedAvgConfig(lr=0.1, weight_decay=0.01), SPEC, num_clients=4)
    assert not ft.personalises
    ya, yb = x0(), x0()
    ft.local_step(ya, grad(), {}, 1, INFO)
    avg.local_step(yb, grad(), {}, 1, INFO)
    assert all(torch.equal(a, b) for a, b in zip(ya, yb, strict=True))
    up_ft, state_ft = ft.client_end(ya, x0(), {}, None, INFO)
    up_avg, _ = avg.client_end(yb, x0(), {}, None, INFO)
    assert state_ft is None
    assert all(torch.equal(a, b) for a, b in zip(up_ft["delta"], up_avg["delta"], strict=True))


def test_fedavg_ft_finetune_step_by_hand() -> None:
    """y <- y - eta_ft (g + lambda y), eta_ft = finetune_lr (lr when null)."""
    ft = FedAvgFT(
        FedAvgFTConfig(lr=0.1, weight_decay=0.01, finetune_lr=0.05, finetune_steps=7),
        SPEC,
        num_clients=4,
    )
    assert ft.finetune_steps() == 7 and ft.finetune_lr() == 0.05
    assert FedAvgFT(FedAvgFTConfig(lr=0.3), SPEC, num_clients=4).finetune_lr() == 0.3
    rule = FineTuning(ft)
    y = x0()
    info = RoundInfo(5, ft.finetune_lr(), 7, 4, 1)
    rule.local_step(y, grad(), {}, 1, info)
    # w: 1 - 0.05 (0.21) = 0.9895;  -2 - 0.05 (0.38) = -2.019;  b: 0.5 + 0.05 (0.995) = 0.54975
    torch.testing.assert_close(y[0], t(0.9895, -2.019), rtol=0, atol=1e-15)
    torch.testing.assert_close(y[1], t(0.54975), rtol=0, atol=1e-15)


def test_finetune_names_restrict_the_step() -> None:
    """A method that fine-tunes only its head (FedRep, FedBABU) leaves the body as it is."""

    class HeadTuned(FedAvgFT):
        def finetune_names(self) -> frozenset[str]:
            return self.spec.head_params

    alg = HeadTuned(FedAvgFTConfig(lr=0.1, weight_decay=0.0), SPEC, num_clients=4)
    y = x0()
    FineTuning(alg).local_step(y, grad(), {}, 1, INFO)
    assert torch.equal(y[0], t(1.0, -2.0))
    torch.testing.assert_close(y[1], t(0.6), rtol=0, atol=1e-15)  # 0.5 - 0.1 * (-1)
