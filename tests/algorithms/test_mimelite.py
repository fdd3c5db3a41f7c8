"""mimelite: the hand rule (server momentum m frozen in every local step, c_i the gradient at x,
m <- (1 - beta) mean c_i + beta m) over rounds with partial participation."""

import torch

from tests.algorithms.harness import Problem, assert_close, flatten, make, run_federated


def mimelite_reference(problem, rounds, K, lrs, sampled, wd, beta, eta_g=1.0):
    x = flatten(problem.x0())
    m = torch.zeros_like(x)
    for r in range(rounds):
        eta = lrs[r]
        deltas, cs = [], []
        for i in sampled[r]:
            cs.append(problem.flat_grad(x, i) + wd * x)
            y = x.clone()
            for _ in range(K):
                g = problem.flat_grad(y, i) + wd * y
                y = y - eta * ((1 - beta) * g + beta * m)
            deltas.append(y - x)
        x = x + eta_g * torch.stack(deltas).mean(0)
        m = (1 - beta) * torch.stack(cs).mean(0) + beta * m
    return x, m


def test_mimelite_three_rounds_by_hand_partial_participation() -> None:
    problem = Problem(clients=4)
    sampled = [[0, 1], [1, 3], [0, 2]]
    lrs = [0.05, 0.04, 0.05]
    alg = make("mimelite", clients=4, weight_decay=0.01, beta=0.7, server_lr=0.9)
    x, server, states = run_federated(
        alg, problem, rounds=3, local_steps=3, lr=lambda r: lrs[r], sampled=sampled
    )
    ref_x, ref_m = mimelite_reference(problem, 3, 3, lrs, sampled, 0.01, 0.7, 0.9)
    assert_close(x, ref_x)
    assert_close(server["m"], ref_m)
    assert states == {}  # no per-client state
    assert (alg.comm_up(), alg.comm_down()) == (16.0, 16.0)


def test_mimelite_with_beta_zero_is_fedavg() -> None:
    problem = Problem(clients=3)
    runs = {}
    for name, fields in (("mimelite", {"beta": 0.0}), ("fedavg", {})):
        alg = make(name, clients=3, weight_decay=0.01, **fields)
        x, _, _ = run_federated(alg, problem, rounds=2, local_steps=4, lr=0.05)
        runs[name] = flatten(x)
    assert_close(runs["mimelite"], runs["fedavg"])
