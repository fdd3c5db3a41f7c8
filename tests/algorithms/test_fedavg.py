"""fedavg: local SGD with coupled decay, server mean (docs/algorithms.md)."""

import torch

from tests.algorithms.harness import Problem, assert_close, flatten, make, run_federated


def fedavg_reference(problem: Problem, rounds: int, K: int, lr: float, wd: float) -> torch.Tensor:
    x = flatten(problem.x0())
    for _ in range(rounds):
        deltas = []
        for i in range(problem.N):
            y = x.clone()
            for _ in range(K):
                y = y - lr * (problem.flat_grad(y, i) + wd * y)
            deltas.append(y - x)
        x = x + torch.stack(deltas).mean(0)
    return x


def test_fedavg_two_rounds_by_hand() -> None:
    problem = Problem()
    alg = make("fedavg", weight_decay=0.01)
    x, _, _ = run_federated(alg, problem, rounds=2, local_steps=3, lr=0.05)
    assert_close(x, fedavg_reference(problem, 2, 3, 0.05, 0.01))
