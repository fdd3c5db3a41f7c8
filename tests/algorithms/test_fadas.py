"""fadas: FedAvg clients + server AMSGrad with bias correction (FADAS, synchronous form)."""

import math

import torch

from tests.algorithms.harness import Problem, assert_close, flatten, make, run_federated


def test_fadas_three_rounds_by_hand() -> None:
    problem, K, lr, wd = Problem(), 3, 0.05, 0.01
    eta_g, b1, b2, eps, v0 = 0.1, 0.8, 0.9, 1e-3, 0.02
    alg = make(
        "fadas", weight_decay=wd, server_lr=eta_g, beta1=b1, beta2=b2, eps=eps, v_max_init=v0
    )
    x, server, _ = run_federated(alg, problem, rounds=3, local_steps=K, lr=lr)

    ref = flatten(problem.x0())
    m, v = torch.zeros_like(ref), torch.zeros_like(ref)
    v_max = torch.full_like(ref, v0)
    for r in range(3):
        deltas = []
        for i in range(problem.N):
            y = ref.clone()
            for _ in range(K):
                y = y - lr * (problem.flat_grad(y, i) + wd * y)
            deltas.append(y - ref)
        d = torch.stack(deltas).mean(0)
        m = b1 * m + (1 - b1) * d
        v = b2 * v + (1 - b2) * d**2
        v_max = torch.maximum(v_max, v)
        t = r + 1
        denom = v_max.sqrt() / math.sqrt(1 - b2**t) + eps
        ref = ref + eta_g / (1 - b1**t) * m / denom
    assert_close(x, ref, tol=1e-12)
    assert_close(server["v_max"], v_max, tol=1e-12)
    # the running max kept the initial floor somewhere, so AMSGrad differs from Adam here
    assert (server["v_max"][0] >= v0).all()


def test_fadas_defaults_follow_the_official_code() -> None:
    p = make("fadas").params
    # server lr: the README's command without delay adaptation (the synchronous form)
    assert (p.beta1, p.beta2, p.eps, p.v_max_init, p.server_lr) == (0.9, 0.99, 1e-8, 0.0, 1e-4)
    assert (p.lr, p.weight_decay) == (0.1, 1e-3)
