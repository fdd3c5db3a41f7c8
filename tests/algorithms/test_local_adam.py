"""local_adam: identical to recreating torch.optim.Adam(weight_decay=lambda) every round."""

import torch

from fedbench.algorithms import RoundInfo
from tests.algorithms.harness import (
    EPS,
    Problem,
    assert_close,
    flatten,
    make,
    run_federated,
    tensor_means,
    unflatten,
)


def test_local_adam_equals_torch_adam_recreated_every_round() -> None:
    problem, K, lr, wd, betas = Problem(), 4, 0.02, 0.05, (0.8, 0.95)
    alg = make("local_adam", weight_decay=wd, beta1=betas[0], beta2=betas[1], eps=EPS)
    x, _, _ = run_federated(alg, problem, rounds=2, local_steps=K, lr=lr)

    ref = problem.x0()
    for _ in range(2):
        finals = []
        for i in range(problem.N):
            params = [torch.nn.Parameter(t.clone()) for t in ref]
            opt = torch.optim.Adam(params, lr=lr, betas=betas, eps=EPS, weight_decay=wd)
            for _ in range(K):
                for p, g in zip(params, problem.grad(params, i), strict=True):
                    p.grad = g
                opt.step()
            finals.append(flatten([p.detach() for p in params]))
        ref_flat = torch.stack(finals).mean(0)  # x + mean(y_i - x) = mean(y_i)
        ref = unflatten(ref_flat)
    assert_close(x, flatten(ref))


def test_local_adam_v_block_means_by_hand() -> None:
    """After two local steps from v = 0 (coupled decay: g + lambda*y enters v), the reported
    block means are the per-tensor means of (1-b2)*b2*g1^2 + (1-b2)*g2^2."""
    problem, lr, wd, b1, b2 = Problem(), 0.02, 0.05, 0.8, 0.95
    alg = make("local_adam", weight_decay=wd, beta1=b1, beta2=b2, eps=EPS)
    x = problem.x0()
    info = RoundInfo(0, lr, 2, problem.N, 1)
    local = alg.client_begin(x, alg.init_server_state(x), None, info)
    y = [t.clone() for t in x]
    ref_y, m, v = (
        flatten(x),
        torch.zeros(8, dtype=torch.float64),
        torch.zeros(8, dtype=torch.float64),
    )
    for k in (1, 2):
        alg.local_step(y, problem.grad(y, 0), local, k, info)
        g = problem.flat_grad(ref_y, 0) + wd * ref_y
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        ref_y = ref_y - lr * (m / (1 - b1**k)) / ((v / (1 - b2**k)).sqrt() + EPS)
    assert_close(y, ref_y)
    assert_close(alg.v_block_means(local), tensor_means(v))
