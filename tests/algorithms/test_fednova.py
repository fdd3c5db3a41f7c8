"""fednova: the hand rule with heterogeneous local steps (x + eta_g tau_eff mean_i Delta_i/tau_i),
FedAvg when every client runs the same steps, and the objective-inconsistency fix on a problem
where FedAvg's fixed point is pulled toward the clients that run longest."""

import torch

from tests.algorithms.harness import Problem, assert_close, flatten, make, run_federated

STEPS = {0: 1, 1: 3, 2: 5}  # tau_i per client


def fednova_reference(problem, rounds, lr, wd, eta_g, steps):
    x = flatten(problem.x0())
    for _ in range(rounds):
        normalised, taus = [], []
        for i in range(problem.N):
            y = x.clone()
            for _ in range(steps[i]):
                y = y - lr * (problem.flat_grad(y, i) + wd * y)
            normalised.append((y - x) / steps[i])
            taus.append(steps[i])
        tau_eff = sum(taus) / len(taus)
        x = x + eta_g * tau_eff * torch.stack(normalised).mean(0)
    return x


def test_fednova_two_rounds_by_hand_with_heterogeneous_steps() -> None:
    problem = Problem(clients=3)
    alg = make("fednova", clients=3, weight_decay=0.01, server_lr=0.8)
    x, _, _ = run_federated(
        alg, problem, rounds=2, local_steps=5, lr=0.05, steps_of=lambda r, i: STEPS[i]
    )
    assert_close(x, fednova_reference(problem, 2, 0.05, 0.01, 0.8, STEPS))
    assert alg.comm_up() == 8.0


def test_fednova_with_equal_steps_is_fedavg() -> None:
    problem = Problem(clients=3)
    nova, _, _ = run_federated(
        make("fednova", clients=3, weight_decay=0.01), problem, rounds=2, local_steps=3, lr=0.05
    )
    avg, _, _ = run_federated(
        make("fedavg", clients=3, weight_decay=0.01), problem, rounds=2, local_steps=3, lr=0.05
    )
    assert_close(nova, flatten(avg))


def test_fednova_removes_the_pull_toward_clients_with_more_steps() -> None:
    """Wang et al.'s point: with tau_i = 1, 3, 5 FedAvg converges to a point weighted toward
    client 2's optimum; FedNova's fixed point is much closer to the true global optimum."""
    problem = Problem(clients=3, n=8, shift=2.0)
    optimum = problem.optimum()
    gaps = {}
    for name in ("fednova", "fedavg"):
        x, _, _ = run_federated(
            make(name, clients=3, weight_decay=0.0),
            problem,
            rounds=300,
            local_steps=5,
            lr=0.01,
            steps_of=lambda r, i: STEPS[i],
        )
        gaps[name] = float((flatten(x) - optimum).norm())
    assert gaps["fednova"] < 0.25 * gaps["fedavg"]
