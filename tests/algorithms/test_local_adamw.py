"""local_adamw: identical to recreating torch.optim.AdamW every round."""

import torch

from tests.algorithms.harness import (
    EPS,
    Problem,
    assert_close,
    flatten,
    make,
    run_federated,
    unflatten,
)


def local_adamw_reference(problem, rounds, K, lr, wd, betas, eps) -> torch.Tensor:
    ref = problem.x0()
    for _ in range(rounds):
        finals = []
        for i in range(problem.N):
            params = [torch.nn.Parameter(t.clone()) for t in ref]
            opt = torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=wd)
            for _ in range(K):
                for p, g in zip(params, problem.grad(params, i), strict=True):
                    p.grad = g
                opt.step()
            finals.append(flatten([p.detach() for p in params]))
        ref = unflatten(torch.stack(finals).mean(0))
    return flatten(ref)


def test_local_adamw_equals_torch_adamw_recreated_every_round() -> None:
    problem, K, lr, wd, betas, eps = Problem(), 4, 0.02, 0.05, (0.8, 0.95), EPS
    alg = make("local_adamw", weight_decay=wd, beta1=betas[0], beta2=betas[1], eps=eps)
    x, _, _ = run_federated(alg, problem, rounds=2, local_steps=K, lr=lr)
    assert_close(x, local_adamw_reference(problem, 2, K, lr, wd, betas, eps))
