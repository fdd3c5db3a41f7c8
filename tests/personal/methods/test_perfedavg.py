"""perfedavg / perfedavg_hf: pairs of local steps (inner step of size alpha, outer step of
size beta from the pair's start), by hand over rounds; HF's finite difference against the exact
Hessian-vector product (the least-squares loss is quadratic, so the two agree)."""

import torch

from fedbench.algorithms import ALGORITHMS, RoundInfo
from tests.algorithms.harness import Problem, assert_close, flatten, make, run_federated, unflatten


def exact_hvp(problem: Problem, i: int, at: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    def loss(vec: torch.Tensor) -> torch.Tensor:
        w, b = unflatten(vec)
        return 0.5 * ((problem.A[i] @ w + b - problem.T[i]) ** 2).sum(dim=1).mean()

    return torch.autograd.functional.hvp(loss, at, u)[1]


def perfedavg_reference(problem, rounds, K, beta, alpha, wd, hf=False):
    x = flatten(problem.x0())
    for _ in range(rounds):
        deltas = []
        for i in range(problem.N):
            y = x.clone()
            y0 = y
            for k in range(1, K + 1):
                if k % 2 == 1:
                    y0 = y
                    y = y0 - alpha * (problem.flat_grad(y0, i) + wd * y0)
                    continue
                u = problem.flat_grad(y, i) + wd * y
                direction = u
                if hf:
                    direction = u - alpha * (exact_hvp(problem, i, y0, u) + wd * u)
                y = y0 - beta * direction
            deltas.append((y0 if K % 2 else y) - x)
        x = x + torch.stack(deltas).mean(0)
    return x


def test_perfedavg_fo_by_hand_even_and_odd_k() -> None:
    problem = Problem(clients=3)
    for K in (4, 3):
        alg = make("perfedavg", clients=3, weight_decay=0.01, inner_lr=0.07)
        x, _, _ = run_federated(alg, problem, rounds=2, local_steps=K, lr=0.05, oracle=True)
        assert_close(x, perfedavg_reference(problem, 2, K, 0.05, 0.07, 0.01))


def test_perfedavg_hf_by_hand() -> None:
    problem = Problem(clients=3)
    alg = make("perfedavg_hf", clients=3, weight_decay=0.01, inner_lr=0.07, hf_delta=1e-3)
    x, _, _ = run_federated(alg, problem, rounds=2, local_steps=4, lr=0.05, oracle=True)
    # the finite difference is exact on a quadratic up to float64 rounding over 2 delta
    assert_close(x, perfedavg_reference(problem, 2, 4, 0.05, 0.07, 0.01, hf=True), tol=1e-9)
    # and it differs from FO by alpha * beta * H u: not negligible here
    fo, _, _ = run_federated(
        make("perfedavg", clients=3, weight_decay=0.01, inner_lr=0.07),
        problem,
        rounds=2,
        local_steps=4,
        lr=0.05,
        oracle=True,
    )
    assert float((flatten(x) - flatten(fo)).abs().max()) > 1e-4


def test_hf_declares_its_gradients_per_step() -> None:
    hf, fo = ALGORITHMS.get("perfedavg_hf"), ALGORITHMS.get("perfedavg")
    assert hf.round_gradients(0, 4) == {1: 2, 3: 2}
    assert hf.round_gradients(0, 5) == {1: 3, 3: 2}
    assert hf.round_gradients(0, 1) == {1: 1}
    assert fo.round_gradients(0, 5) == {1: 5}


def test_evaluation_personalises_by_one_step_of_alpha() -> None:
    """The paper's evaluation: one SGD step of size alpha from x (with the coupled decay), the
    method's fine-tuning; finetune_lr, when set, replaces alpha."""
    problem = Problem(clients=1)
    alg = make("perfedavg", clients=1, weight_decay=0.01, inner_lr=0.07)
    assert (alg.finetune_steps(), alg.finetune_lr()) == (1, 0.07)
    assert not alg.personalises  # nothing is stored per client
    y = problem.x0()
    x = flatten(y).clone()
    info = RoundInfo(0, alg.finetune_lr(), 1, 1, 1)
    alg.finetune_step(y, problem.grad(y, 0), {}, 1, info)
    assert_close(y, x - 0.07 * (problem.flat_grad(x, 0) + 0.01 * x))
    assert make("perfedavg", clients=1, inner_lr=0.07, finetune_lr=0.2).finetune_lr() == 0.2
