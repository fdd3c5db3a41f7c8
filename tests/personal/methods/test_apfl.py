"""apfl: w by FedAvg's step, v <- v - lr (alpha g(v_bar) + wd v), alpha <- clip(alpha - lr_a
<v - w, g(v_bar)>, 0, 1), all from the values before the step; by hand over rounds."""

import torch

from fedbench.algorithms.base import StepOracle
from tests.algorithms.harness import (
    Problem,
    assert_close,
    flatten,
    make,
    run_federated,
    unflatten,
)


def apfl_reference(problem, sampled, K, lr, wd, alpha0, alpha_lr, adaptive=True):
    x = flatten(problem.x0())
    state: dict[int, tuple[torch.Tensor, float]] = {}
    for clients in sampled:
        deltas = []
        for i in clients:
            y = x.clone()
            v, alpha = state.get(i, (x.clone(), alpha0))
            for _ in range(K):
                g = problem.flat_grad(y, i)
                v_bar = alpha * v + (1 - alpha) * y
                g_bar = problem.flat_grad(v_bar, i)
                new_alpha = alpha
                if adaptive:
                    new_alpha = min(max(alpha - alpha_lr * float((v - y) @ g_bar), 0.0), 1.0)
                y = y - lr * (g + wd * y)
                v = v - lr * (alpha * g_bar + wd * v)
                alpha = new_alpha
            state[i] = (v, alpha)
            deltas.append(y - x)
        x = x + torch.stack(deltas).mean(0)
    return x, state


def test_apfl_by_hand_adaptive_and_fixed() -> None:
    problem = Problem(clients=3, shift=2.0)
    sampled = [[0, 1], [1, 2], [0, 1]]
    for adaptive in (True, False):
        alg = make(
            "apfl",
            clients=3,
            weight_decay=0.01,
            alpha=0.3,
            alpha_lr=0.2,
            lr=0.05,
            adaptive_alpha=adaptive,
        )
        x, _, states = run_federated(
            alg, problem, rounds=3, local_steps=3, lr=0.05, sampled=sampled, oracle=True
        )
        x_ref, ref = apfl_reference(problem, sampled, 3, 0.05, 0.01, 0.3, 0.2, adaptive)
        assert_close(x, x_ref)
        for i, (v, alpha) in ref.items():
            assert_close(states[i]["v"], v)
            assert abs(float(states[i]["alpha"]) - alpha) < 1e-12
            personal = unflatten(x_ref)
            alg.load_personalised(personal, [], states[i])
            assert_close(personal, alpha * v + (1 - alpha) * x_ref)
        moved = {round(float(s["alpha"]), 12) for s in states.values()}
        assert moved != {0.3} if adaptive else moved == {0.3}


def test_alpha_is_clipped_to_the_unit_interval() -> None:
    problem = Problem(clients=1, shift=5.0)
    alg = make("apfl", clients=1, weight_decay=0.0, alpha=0.9, alpha_lr=1e3, lr=0.05)
    _, _, states = run_federated(alg, problem, rounds=2, local_steps=2, lr=0.05, oracle=True)
    _, ref = apfl_reference(problem, [[0], [0]], 2, 0.05, 0.0, 0.9, 1e3)
    assert float(states[0]["alpha"]) == ref[0][1] and ref[0][1] in (0.0, 1.0)


def test_the_oracle_dot_is_per_client() -> None:
    a = [torch.arange(6.0, dtype=torch.float64).reshape(3, 2), torch.ones(3, dtype=torch.float64)]
    b = [torch.full((3, 2), 2.0, dtype=torch.float64), torch.arange(3.0, dtype=torch.float64)]
    rows = StepOracle(lambda: [], rows=3).dot(a, b)
    assert rows.tolist() == [2.0 * (0 + 1) + 0.0, 2.0 * (2 + 3) + 1.0, 2.0 * (4 + 5) + 2.0]
    one = StepOracle(lambda: []).dot(a, b)
    assert float(one) == float(rows.sum())
