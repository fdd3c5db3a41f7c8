"""fedavgm: server momentum m <- beta*m + Delta_bar; x <- x + eta_g*m (docs/algorithms.md, "Local SGD and server-side methods")."""

import torch

from tests.algorithms.harness import Problem, assert_close, flatten, make, run_federated


def test_fedavgm_two_rounds_by_hand() -> None:
    problem, K, lr, wd, beta, eta_g = Problem(), 3, 0.05, 0.01, 0.9, 0.7
    alg = make("fedavgm", weight_decay=wd, momentum=beta, server_lr=eta_g)
    x, _, _ = run_federated(alg, problem, rounds=2, local_steps=K, lr=lr)

    ref = flatten(problem.x0())
    m = torch.zeros_like(ref)
    for _ in range(2):
        deltas = []
        for i in range(problem.N):
            y = ref.clone()
            for _ in range(K):
                y = y - lr * (problem.flat_grad(y, i) + wd * y)
            deltas.append(y - ref)
        m = beta * m + torch.stack(deltas).mean(0)
        ref = ref + eta_g * m
    assert_close(x, ref)


def test_fedavgm_defaults() -> None:
    params = make("fedavgm").params
    assert (params.momentum, params.lr, params.weight_decay) == (0.9, 0.1, 1e-3)
