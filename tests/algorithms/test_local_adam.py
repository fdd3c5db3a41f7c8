"""local_adam: identical to recreating torch.optim.Adam(weight_decay=lambda) every round."""

import torch

from tests.algorithms.helpers import Problem, assert_close, flatten, make, run_federated, unflatten


def test_local_adam_equals_torch_adam_recreated_every_round() -> None:
    problem, K, lr, wd, betas, eps = Problem(), 4, 0.02, 0.05, (0.8, 0.95), 1e-6
    alg = make("local_adam", weight_decay=wd, beta1=betas[0], beta2=betas[1], eps=eps)
    x, _, _ = run_federated(alg, problem, rounds=2, local_steps=K, lr=lr)

    ref = problem.x0()
    for _ in range(2):
        finals = []
        for i in range(problem.N):
            params = [torch.nn.Parameter(t.clone()) for t in ref]
            opt = torch.optim.Adam(params, lr=lr, betas=betas, eps=eps, weight_decay=wd)
            for _ in range(K):
                for p, g in zip(params, problem.grad(params, i), strict=True):
                    p.grad = g
                opt.step()
            finals.append(flatten([p.detach() for p in params]))
        ref_flat = torch.stack(finals).mean(0)  # x + mean(y_i - x) = mean(y_i)
        ref = unflatten(ref_flat)
    assert_close(x, flatten(ref), tol=1e-10)


def test_local_adam_reports_v_block_means() -> None:
    alg = make("local_adam")
    local = alg.client_begin(Problem().x0(), {}, None, None)  # type: ignore[arg-type]
    assert alg.v_block_means(local).shape == (2,)
