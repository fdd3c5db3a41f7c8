"""fedprox: y <- y - eta*(g + lambda*y + mu*(y - x^r)) (docs/algorithms.md)."""

import torch

from tests.algorithms.harness import Problem, assert_close, flatten, make, run_federated


def test_fedprox_two_rounds_by_hand() -> None:
    problem, K, lr, wd, mu = Problem(), 4, 0.05, 0.01, 0.5
    alg = make("fedprox", weight_decay=wd, mu=mu)
    x, _, _ = run_federated(alg, problem, rounds=2, local_steps=K, lr=lr)

    ref = flatten(problem.x0())
    for _ in range(2):
        deltas = []
        for i in range(problem.N):
            y = ref.clone()
            for _ in range(K):
                y = y - lr * (problem.flat_grad(y, i) + wd * y + mu * (y - ref))
            deltas.append(y - ref)
        ref = ref + torch.stack(deltas).mean(0)
    assert_close(x, ref)


def test_fedprox_default_mu() -> None:
    assert make("fedprox").params.mu == 0.01
