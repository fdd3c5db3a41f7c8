"""fedlada: local AMSGrad from v_bar, alpha mixture with g_a, coupled decay, no bias correction."""

import torch

from tests.algorithms.harness import EPS, Problem, assert_close, flatten, make, run_federated


def test_fedlada_three_rounds_by_hand() -> None:
    problem, K, wd, alpha, b1, b2, eps = Problem(), 3, 0.01, 0.3, 0.9, 0.99, EPS
    lrs = [0.01, 0.02, 0.015]
    alg = make("fedlada", weight_decay=wd, alpha=alpha, beta1=b1, beta2=b2, eps=eps)
    x, server, _ = run_federated(alg, problem, rounds=3, local_steps=K, lr=lambda r: lrs[r])

    ref = flatten(problem.x0())
    g_a = torch.zeros_like(ref)
    v_bar = torch.zeros_like(ref)
    for r in range(3):
        deltas, v_hats = [], []
        for i in range(problem.N):
            y, m, v, v_hat = ref.clone(), torch.zeros_like(ref), v_bar.clone(), v_bar.clone()
            for _ in range(K):
                g = problem.flat_grad(y, i) + wd * y
                m = b1 * m + (1 - b1) * g
                v = b2 * v + (1 - b2) * g**2
                v_hat = torch.maximum(v_hat, v)
                y = y - lrs[r] * (alpha * m / (v_hat.sqrt() + eps) + (1 - alpha) * g_a)
            deltas.append(y - ref)
            v_hats.append(v_hat)
        delta_bar = torch.stack(deltas).mean(0)
        ref = ref + delta_bar
        v_bar = torch.stack(v_hats).mean(0)
        g_a = -delta_bar / (K * lrs[r])
    assert_close(x, ref)
    assert_close(server["v_bar"], v_bar)
    assert_close(server["g_a"], g_a)


def test_fedlada_comm_and_defaults() -> None:
    alg = make("fedlada")
    p = alg.params
    assert (p.alpha, p.beta1, p.beta2, p.eps, p.lr) == (0.1, 0.9, 0.999, 1e-8, 3e-4)
    assert (alg.comm_up(), alg.comm_down()) == (16.0, 24.0)
