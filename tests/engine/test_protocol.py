"""The round protocol (fedbench.engine.protocol): each client begun just before its training and
ended just after, in groups of `clients_together`; K_i per client with the nominal K kept; the
stored client states; the weighted streaming mean and the server step, in float64."""

from __future__ import annotations

import pytest
import torch
from torch import Tensor

from fedbench.algorithms import ALGORITHMS, ParamSpec, RoundInfo
from fedbench.algorithms.base import Algorithm, State, Tensors, Upload
from fedbench.engine.protocol import ClientStart, Federation, Trained, run_round

SPEC = ParamSpec(names=["w"], shapes=[torch.Size([2])], heads={})
INFO = RoundInfo(round=0, lr=0.1, local_steps=3, num_clients=4, sampled=3)


class Logged(Algorithm):
    """FedAvg that logs its client hooks and keeps a count of rounds per client."""

    def __init__(self, log: list[str]) -> None:
        cls = ALGORITHMS.get("fedavg")
        super().__init__(cls.Params(server_lr=1.0), SPEC, num_clients=4)
        self.log = log

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        self.log.append(f"begin {info.sampled}")
        return {"seen": 0 if client_state is None else client_state["seen"]}

    def local_step(self, y: Tensors, g: Tensors, local: State, k: object, info: RoundInfo) -> None:
        raise AssertionError("the caller's training runs the steps")

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        self.log.append("end")
        return {"delta": torch._foreach_sub(y, x)}, {"seen": local["seen"] + 1}


def _targets() -> dict[int, Tensor]:
    return {c: torch.tensor([c, -2.0 * c], dtype=torch.float64) for c in range(4)}


@pytest.mark.parametrize(
    ("together", "expected"),
    [
        (1, ["begin 3", "train [0]", "end", "begin 3", "train [2]", "end", "begin 3",
             "train [3]", "end"]),
        (2, ["begin 3", "begin 3", "train [0, 2]", "end", "end", "begin 3", "train [3]", "end"]),
        (None, ["begin 3"] * 3 + ["train [0, 2, 3]"] + ["end"] * 3),
    ],
)  # fmt: skip
def test_clients_are_begun_trained_and_ended_in_groups(
    together: int | None, expected: list[str]
) -> None:
    log: list[str] = []
    algorithm = Logged(log)
    x = [torch.zeros(2, dtype=torch.float64)]
    fed = Federation(algorithm, x, {}, {})
    targets = _targets()

    def train(starts: list[ClientStart]) -> list[Trained]:
        log.append(f"train {[s.client for s in starts]}")
        return [Trained([targets[s.client].clone()]) for s in starts]

    run_round(fed, [0, 2, 3], INFO, train, clients_together=together)
    assert log == expected
    # FedAvg's server step with eta_g = 1: x = the uniform mean of the clients' y.
    assert torch.equal(x[0], (targets[0] + targets[2] + targets[3]) / 3)
    assert fed.client_states == {0: {"seen": 1}, 2: {"seen": 1}, 3: {"seen": 1}}
    run_round(fed, [2], INFO, train)
    assert fed.client_states[2] == {"seen": 2}  # its stored state came back to client_begin


class Seeded(Logged):
    """Logged whose clients start from a state of their own (FedRoD's class counts)."""

    def new_client_state(self, client: int, x: Tensors) -> State | None:
        return {"seen": 10 * client}


def test_a_first_visit_begins_from_new_client_state() -> None:
    algorithm = Seeded([])
    x = [torch.zeros(2, dtype=torch.float64)]
    fed = Federation(algorithm, x, {}, {})
    targets = _targets()
    begun: dict[int, State | None] = {}

    def train(starts: list[ClientStart]) -> list[Trained]:
        begun.update({s.client: s.stored for s in starts})
        return [Trained([targets[s.client].clone()]) for s in starts]

    run_round(fed, [1, 3], INFO, train)
    assert begun == {1: {"seen": 10}, 3: {"seen": 30}}  # handed over as the stored state
    assert fed.client_states == {1: {"seen": 11}, 3: {"seen": 31}}  # stored by client_end
    run_round(fed, [3], INFO, train)
    assert begun[3] == {"seen": 31} and fed.client_states[3] == {"seen": 32}
    # a rule without the hook still begins from None
    assert Logged([]).new_client_state(1, x) is None


def test_each_client_sees_its_own_steps_and_its_weight() -> None:
    algorithm = Logged([])
    x = [torch.zeros(2, dtype=torch.float64)]
    sizes = {1: 3.0, 2: 1.0}
    fed = Federation(algorithm, x, {}, {}, weight=sizes.__getitem__)
    targets = _targets()
    seen: dict[int, RoundInfo] = {}

    def train(starts: list[ClientStart]) -> list[Trained]:
        (start,) = starts
        seen[start.client] = start.info
        return [Trained([targets[start.client].clone()])]

    run_round(fed, [1, 2], INFO, train, steps_of=lambda c: c + 1)
    assert [(i.local_steps, i.nominal_steps, i.run_steps) for i in seen.values()] == [
        (2, 3, 3),
        (3, 3, 3),
    ]
    assert torch.equal(x[0], (3.0 * targets[1] + targets[2]) / 4.0)  # the weighted mean
    run_round(fed, [1], INFO, train)
    assert seen[1] is INFO  # without steps_of, every client sees the round's info
