"""Local AdamW equals torch.optim.AdamW recreated every round (ALGORITHMS.md, local_adamw)."""

import math

import torch

from tests.algorithms.helpers import (
    assert_close,
    build,
    grad,
    initial_x,
    loss_fn,
    make_clients,
    simulate,
)


def test_local_adamw_equals_torch_adamw_recreated_each_round():
    clients, x0 = make_clients(), initial_x()
    lrs, lam, K = [1e-2, 5e-3], 0.05, 3
    algo = build("local_adamw", weight_decay=lam, beta1=0.8, beta2=0.95, eps=1e-6)
    got = simulate(algo, x0, clients, rounds=2, local_steps=K, lrs=lrs)

    x = [t.clone() for t in x0]
    for lr in lrs:
        deltas = []
        for data in clients:
            y = [torch.nn.Parameter(t.clone()) for t in x]
            opt = torch.optim.AdamW(y, lr=lr, betas=(0.8, 0.95), eps=1e-6, weight_decay=lam)
            for _ in range(K):
                opt.zero_grad()
                loss_fn(y, data).backward()
                opt.step()
            deltas.append([yi.detach() - xi for yi, xi in zip(y, x)])
        x = [xi + sum(d[j] for d in deltas) / len(deltas) for j, xi in enumerate(x)]
    assert_close(got, x)


def test_local_adamw_first_step_by_hand():
    """At k = 1 bias correction makes the step lr * g/(|g| + eps') - lr*lambda*y."""
    clients, x0 = make_clients(n_clients=1), initial_x()
    lr, lam, b1, b2, eps = 1e-2, 0.1, 0.9, 0.999, 1e-8
    algo = build("local_adamw", weight_decay=lam)
    got = simulate(algo, x0, clients, rounds=1, local_steps=1, lrs=[lr])
    g = grad(x0, clients[0])
    expected = []
    for xi, gi in zip(x0, g):
        m_hat = (1 - b1) * gi / (1 - b1)
        v_hat = (1 - b2) * gi**2 / (1 - b2)
        expected.append(xi - lr * (m_hat / (v_hat.sqrt() + eps) + lam * xi))
    assert_close(got, expected)
    assert math.isclose(algo.comm_up(), 8.0)
