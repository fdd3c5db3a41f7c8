"""pfedme: inner_steps steps on theta (carried over within the round), w <- w - eta lambda
(w - theta), server x + beta Delta_bar; by hand over rounds."""

import torch

from fedbench.algorithms import ALGORITHMS
from tests.algorithms.harness import (
    Problem,
    assert_close,
    flatten,
    make,
    run_federated,
    unflatten,
)


def pfedme_reference(problem, sampled, K, lr, wd, lam, plr, inner, beta):
    x = flatten(problem.x0())
    theta_of: dict[int, torch.Tensor] = {}
    for clients in sampled:
        deltas = []
        for i in clients:
            w, theta = x.clone(), x.clone()
            for _ in range(K):
                for _ in range(inner):
                    g = problem.flat_grad(theta, i) + wd * theta
                    theta = theta - plr * (g + lam * (theta - w))
                w = w - lr * lam * (w - theta)
            theta_of[i] = theta
            deltas.append(w - x)
        x = (1 - beta) * x + beta * (x + torch.stack(deltas).mean(0))
    return x, theta_of


def test_pfedme_by_hand() -> None:
    problem = Problem(clients=3)
    sampled = [[0, 2], [1, 2]]
    alg = make(
        "pfedme",
        clients=3,
        weight_decay=0.01,
        lam=2.0,
        personal_lr=0.04,
        inner_steps=3,
        server_lr=1.5,
    )
    x, _, states = run_federated(
        alg, problem, rounds=2, local_steps=2, lr=0.05, sampled=sampled, oracle=True
    )
    x_ref, theta_ref = pfedme_reference(problem, sampled, 2, 0.05, 0.01, 2.0, 0.04, 3, 1.5)
    assert_close(x, x_ref)
    assert set(states) == {0, 1, 2}
    for i, theta in theta_ref.items():
        assert_close(states[i]["theta"], theta)
        tested = unflatten(x_ref)
        alg.load_personalised(tested, [], states[i])
        assert_close(tested, theta)


def test_pfedme_counts_its_inner_gradients() -> None:
    cls = ALGORITHMS.get("pfedme")
    assert cls.round_gradients(0, 4) == {5: 4}
    assert cls.round_gradients(0, 4, cls.Params(inner_steps=2)) == {2: 4}
