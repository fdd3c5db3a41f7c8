"""FedPer, FedRep, LG-FedAvg, FedBABU and FedBN (fedbench.personal.methods): two rounds of each
through the engine's round protocol on the float64 least-squares problem of the update-rule
tests, against a straight-line hand computation on flat vectors (docs/personalised.md, "The
split-model methods: what they share").

The problem's model is y = A W + b: W (6 floats) plays the body and b (2 floats) the head.
Round 0 trains clients 0 and 1, round 1 clients 1 and 2: client 1 comes back with its kept
part, client 2 arrives for the first time, client 0 keeps its part without training.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import Tensor

from fedbench.algorithms import ALGORITHMS, Algorithm, ParamSpec, RoundInfo
from fedbench.engine.protocol import ClientStart, Federation, Trained, run_round
from tests.algorithms.harness import SHAPES, Problem, assert_close, flatten

SAMPLED = [[0, 1], [1, 2]]
K, LR, WD, ETA_G = 5, 0.05, 0.01, 1.0
#: Flat coordinates of W (the body) and b (the head).
BODY, HEAD = slice(0, 6), slice(6, 8)


def spec(**fields: Any) -> ParamSpec:
    return ParamSpec(
        names=["weight", "bias"], shapes=SHAPES, heads={}, head_params=frozenset({"bias"}), **fields
    )


def make(name: str, spec_fields: dict[str, Any] | None = None, **params: Any) -> Algorithm:
    cls = ALGORITHMS.get(name)
    p = cls.Params(name=name, grad_clip=None, lr_schedule="constant", weight_decay=WD, **params)
    return cls(p, spec(**(spec_fields or {})), num_clients=3)


def run(alg: Algorithm, problem: Problem) -> tuple[list[Tensor], dict[int, Any]]:
    """The engine's round protocol; each client's model is x with its stored part loaded
    (`load_client`), as the executors build it."""
    x = problem.x0()
    fed = Federation(alg, x, alg.init_server_state(x), {})

    def train(starts: list[ClientStart]) -> list[Trained]:
        (start,) = starts
        y = [t.clone() for t in x]
        if alg.personalises:
            alg.load_client(y, [], start.stored)
        for k in range(1, start.info.local_steps + 1):
            g = problem.grad(y, start.client)
            with torch.no_grad():
                alg.local_step(y, g, start.local, k, start.info)
        return [Trained(y)]

    for r, clients in enumerate(SAMPLED):
        run_round(fed, clients, RoundInfo(r, LR, K, problem.N, len(clients)), train)
    return x, dict(fed.client_states)


Step = Callable[[int, Tensor, Tensor], Tensor]


def by_hand(
    problem: Problem, personal: slice | None, shared: slice, trained_at: Callable[[int], slice]
) -> tuple[Tensor, dict[int, Tensor]]:
    """The rule on flat vectors: start from x with the kept part, K SGD steps on the
    coordinates `trained_at(k)`, keep `personal`, average the change of `shared`."""
    x = flatten(problem.x0())
    kept: dict[int, Tensor] = {}
    for clients in SAMPLED:
        deltas = []
        for i in clients:
            y = x.clone()
            if personal is not None and i in kept:
                y[personal] = kept[i]
            for k in range(1, K + 1):
                g = problem.flat_grad(y, i)
                part = trained_at(k)
                y[part] = y[part] - LR * (g[part] + WD * y[part])
            if personal is not None:
                kept[i] = y[personal].clone()
            delta = torch.zeros_like(x)
            delta[shared] = y[shared] - x[shared]
            deltas.append(delta)
        x = x + ETA_G * torch.stack(deltas).mean(0)
    return x, kept


def every(k: int) -> slice:
    return slice(0, 8)


def test_fedper_two_rounds_by_hand() -> None:
    problem = Problem()
    x, states = run(make("fedper"), problem)
    ref_x, ref_kept = by_hand(problem, HEAD, BODY, every)
    assert_close(x, ref_x)
    assert sorted(states) == [0, 1, 2]
    for i, head in ref_kept.items():
        assert_close(states[i]["personal"], head)
    # the server's head never moves: the model's initial head, which client 2 started from
    assert_close([x[1]], flatten(problem.x0())[HEAD])


def test_lg_fedavg_two_rounds_by_hand() -> None:
    problem = Problem()
    x, states = run(make("lg_fedavg"), problem)
    ref_x, ref_kept = by_hand(problem, BODY, HEAD, every)
    assert_close(x, ref_x)
    for i, body in ref_kept.items():
        assert_close(states[i]["personal"], body)
    assert_close([x[0]], flatten(problem.x0())[BODY])


@pytest.mark.parametrize(
    ("order", "head_epochs", "body_epochs", "first", "k_first"),
    [
        ("head_first", 3, 2, HEAD, 3),  # K_h = floor(5 * 3 / 5) = 3 head steps, then 2 body
        ("body_first", 3, 2, BODY, 2),  # the body's 2 steps, then the head's 3
        ("head_first", 10, 1, HEAD, 4),  # the paper's 10:1 on K = 5: floor(50 / 11) = 4
    ],
)
def test_fedrep_two_rounds_by_hand(
    order: str, head_epochs: int, body_epochs: int, first: slice, k_first: int
) -> None:
    problem = Problem()
    alg = make("fedrep", order=order, head_epochs=head_epochs, body_epochs=body_epochs)
    x, states = run(alg, problem)
    second = BODY if first == HEAD else HEAD

    def trained_at(k: int) -> slice:
        return first if k <= k_first else second

    ref_x, ref_kept = by_hand(problem, HEAD, BODY, trained_at)
    assert_close(x, ref_x)
    for i, head in ref_kept.items():
        assert_close(states[i]["personal"], head)


def test_fedbabu_two_rounds_by_hand() -> None:
    problem = Problem()
    alg = make("fedbabu")
    x, states = run(alg, problem)
    ref_x, _ = by_hand(problem, None, BODY, lambda k: BODY)
    assert_close(x, ref_x)
    assert_close([x[1]], flatten(problem.x0())[HEAD])  # the head stays at its initialisation
    assert states == {} and not alg.personalises
    assert alg.finetune_names() is None  # finetune: full (the paper)
    assert make("fedbabu", finetune="head").finetune_names() == frozenset({"bias"})


def test_fedbn_two_rounds_by_hand() -> None:
    # b plays a BatchNorm layer's affine part (the statistics: tests/personal/test_fedbn.py)
    problem = Problem()
    alg = make("fedbn", {"batchnorm_params": frozenset({"bias"}), "batchnorm_buffers": ()})
    x, states = run(alg, problem)
    ref_x, ref_kept = by_hand(problem, HEAD, BODY, every)
    assert_close(x, ref_x)
    for i, norm in ref_kept.items():
        assert_close(states[i]["personal"], norm)


@pytest.mark.parametrize(
    ("name", "finetuned", "label", "up"),
    [
        ("fedper", {"bias"}, "d - L", 6),
        ("fedrep", {"bias"}, "d - L", 6),
        ("lg_fedavg", {"weight"}, "d - L", 2),
        ("fedbabu", None, "d - L", 6),
    ],
)
def test_finetuning_and_communication(
    name: str, finetuned: set[str] | None, label: str, up: int
) -> None:
    alg = make(name)
    assert alg.finetune_names() == (None if finetuned is None else frozenset(finetuned))
    assert type(alg).comm_up_label == label
    assert alg.comm_up() == alg.comm_down() == up  # d = 8: what is not kept off the wire


def test_server_step_discards_the_mean_of_the_personal_part() -> None:
    # Under client-level DP the mean update carries noise on every coordinate: the split
    # methods apply only its shared part (W), so the server's head stays as it was.
    alg = make("fedper")
    x = [torch.ones(3, 2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)]
    mean = {
        "delta": [
            torch.full((3, 2), 0.5, dtype=torch.float64),
            torch.tensor([7.0, -7.0], dtype=torch.float64),
        ]
    }
    alg.server_update(x, mean, {}, RoundInfo(0, LR, K, 3, 2))
    assert x[0].eq(1.5).all() and x[1].eq(1.0).all()


def test_refusals() -> None:
    with pytest.raises(Exception, match="no head"):
        ALGORITHMS.get("fedper")(
            ALGORITHMS.get("fedper").Params(),
            ParamSpec(names=["weight"], shapes=[torch.Size([2])], heads={}),
            num_clients=2,
        )
    with pytest.raises(Exception, match="BatchNorm"):
        make("fedbn")
    with pytest.raises(ValueError, match="both 0"):
        ALGORITHMS.get("fedrep").Params(head_epochs=0, body_epochs=0)
