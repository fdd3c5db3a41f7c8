"""scaffold (option II): the hand rule, its 1/N server update, convergence to the global optimum
where FedAvg stays biased (exact resume of the c_i: tests/engine/test_resume.py)."""

import torch

from tests.algorithms.harness import Problem, assert_close, flatten, make, run_federated


def scaffold_reference(problem, rounds, K, lrs, sampled, wd, eta_g=1.0):
    x = flatten(problem.x0())
    c = torch.zeros_like(x)
    c_i = {i: torch.zeros_like(x) for i in range(problem.N)}
    for r in range(rounds):
        eta = lrs[r]
        deltas, delta_cs = [], []
        for i in sampled[r]:
            y = x.clone()
            for _ in range(K):
                y = y - eta * (problem.flat_grad(y, i) + wd * y - c_i[i] + c)
            new = c_i[i] - c + (x - y) / (K * eta)
            delta_cs.append(new - c_i[i])
            c_i[i] = new
            deltas.append(y - x)
        x = x + eta_g * torch.stack(deltas).mean(0)
        c = c + torch.stack(delta_cs).sum(0) / problem.N
    return x, c, c_i


def test_scaffold_three_rounds_by_hand_partial_participation() -> None:
    problem = Problem(clients=4)
    sampled = [[0, 1], [1, 3], [0, 2]]
    lrs = [0.05, 0.04, 0.05]
    alg = make("scaffold", clients=4, weight_decay=0.01, server_lr=0.8)
    x, server, states = run_federated(
        alg, problem, rounds=3, local_steps=3, lr=lambda r: lrs[r], sampled=sampled
    )
    ref_x, ref_c, ref_ci = scaffold_reference(problem, 3, 3, lrs, sampled, 0.01, eta_g=0.8)
    assert_close(x, ref_x)
    assert_close(server["c"], ref_c)
    for i, state in states.items():
        assert_close(state["c"], ref_ci[i])
    assert sorted(states) == [0, 1, 2, 3]
    assert (alg.comm_up(), alg.comm_down()) == (16.0, 16.0)


def test_scaffold_reaches_global_optimum_where_fedavg_is_biased() -> None:
    problem = Problem(clients=4, n=8, shift=2.0)
    optimum = problem.optimum()
    runs = {}
    for name in ("scaffold", "fedavg"):
        alg = make(name, clients=4, weight_decay=0.0)
        x, _, _ = run_federated(alg, problem, rounds=150, local_steps=10, lr=0.05)
        runs[name] = float((flatten(x) - optimum).norm())
    assert runs["scaffold"] < 1e-6
    assert runs["fedavg"] > 1e-3
