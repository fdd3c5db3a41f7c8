"""fedcm: y <- y - eta_r*(alpha*g + (1-alpha)*d_r + lambda*y), d_r = -Delta_bar^{r-1}/(K eta_{r-1})."""

import torch

from tests.algorithms.harness import Problem, assert_close, flatten, make, run_federated


def test_fedcm_three_rounds_by_hand_with_changing_lr() -> None:
    problem, K, wd, alpha = Problem(), 3, 0.01, 0.3
    lrs = [0.05, 0.04, 0.03]
    alg = make("fedcm", weight_decay=wd, alpha=alpha)
    x, _, _ = run_federated(alg, problem, rounds=3, local_steps=K, lr=lambda r: lrs[r])

    ref = flatten(problem.x0())
    d = torch.zeros_like(ref)
    for r in range(3):
        deltas = []
        for i in range(problem.N):
            y = ref.clone()
            for _ in range(K):
                g = problem.flat_grad(y, i)
                y = y - lrs[r] * (alpha * g + (1 - alpha) * d + wd * y)
            deltas.append(y - ref)
        delta_bar = torch.stack(deltas).mean(0)
        ref = ref + delta_bar
        d = -delta_bar / (K * lrs[r])
    assert_close(x, ref)


def test_fedcm_comm_and_defaults() -> None:
    alg = make("fedcm")
    assert alg.params.alpha == 0.1
    assert (alg.comm_up(), alg.comm_down()) == (8.0, 16.0)
