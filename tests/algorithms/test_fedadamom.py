"""fedadamom: server momentum with beta1 = clamp(1 - v/v_mean, 0, 1 - eps_m)."""

import torch

from fedbench.algorithms.fedadamom import adaptive_beta1
from tests.algorithms.harness import Problem, assert_close, flatten, make, run_federated


def test_fedadamom_three_rounds_by_hand() -> None:
    problem, K, lr, wd, b2, eps_m, eta_g = Problem(), 3, 0.05, 0.01, 0.3, 0.05, 0.9
    alg = make("fedadamom", weight_decay=wd, beta2=b2, eps_m=eps_m, server_lr=eta_g)
    x, server, _ = run_federated(alg, problem, rounds=3, local_steps=K, lr=lr)

    ref = flatten(problem.x0())
    m, v = torch.zeros_like(ref), torch.zeros_like(ref)
    for _ in range(3):
        deltas = []
        for i in range(problem.N):
            y = ref.clone()
            for _ in range(K):
                y = y - lr * (problem.flat_grad(y, i) + wd * y)
            deltas.append(y - ref)
        d = torch.stack(deltas).mean(0)
        v = b2 * v + (1 - b2) * d**2
        beta1 = torch.clamp(1 - v / v.mean(), 0.0, 1 - eps_m)
        m = beta1 * m + (1 - beta1) * d
        ref = ref + eta_g * m
    assert_close(x, ref)
    assert_close(server["v"], v)


def test_adaptive_beta1_stays_in_range() -> None:
    gen = torch.Generator().manual_seed(0)
    for eps_m in (1e-3, 0.1):
        for _ in range(20):
            v = [torch.rand(3, 2, generator=gen) ** 4, torch.rand(5, generator=gen) * 3]
            v[0][0, 0] = 0.0  # a zero coordinate gets the largest allowed beta1
            beta1 = torch.cat([b.reshape(-1) for b in adaptive_beta1(v, eps_m)])
            assert beta1.min() >= 0.0 and beta1.max() <= 1 - eps_m
            assert beta1[0] == 1 - eps_m


def test_adaptive_beta1_is_zero_where_v_mean_is_zero() -> None:
    beta1 = adaptive_beta1([torch.zeros(3, 2), torch.zeros(2)], 1e-3)
    assert all(torch.equal(b, torch.zeros_like(b)) for b in beta1)


def test_fedadamom_defaults() -> None:
    p = make("fedadamom").params
    assert (p.beta2, p.eps_m, p.server_lr, p.lr, p.lr_decay) == (0.1, 1e-3, 1.0, 0.1, 0.998)
    from fedbench.algorithms import ALGORITHMS

    assert ALGORITHMS.get("fedadamom").Params().lr_schedule == "exp"
