"""fafed: client STORM momentum with a shared adaptive matrix fixed within a round; x, m, v
averaged every round (FAFED, AAAI 2023)."""

from __future__ import annotations

import pytest
import torch

from fedbench.algorithms import RoundInfo
from fedbench.errors import FedbenchError
from tests.algorithms.harness import Problem, assert_close, flatten, make, unflatten


def run_fafed(alg, problem, rounds, K, lr, sampled):
    """The engine's sequence with the gradient oracle (full-batch: every call sees the same
    data, as two calls within one step do)."""
    x = problem.x0()
    server = alg.init_server_state(x)
    for r in range(rounds):
        info = RoundInfo(r, lr, K, problem.N, len(sampled[r]))
        sums: dict = {}
        for i in sampled[r]:
            local = alg.client_begin(x, server, None, info)
            y = [t.clone() for t in x]
            for k in range(1, K + 1):
                alg.local_step_with_oracle(y, lambda i=i, y=y: problem.grad(y, i), local, k, info)
            upload, state = alg.client_end(y, x, local, None, info)
            assert state is None  # non-sampled clients keep nothing
            for key, ts in upload.items():
                sums[key] = [a + b for a, b in zip(sums[key], ts)] if key in sums else ts
        mean = {k: [t / len(sampled[r]) for t in v] for k, v in sums.items()}
        alg.server_update(x, mean, server, info)
    return x, server


def test_fafed_three_rounds_by_hand_with_partial_participation() -> None:
    problem, K, lr, wd, a, b2, rho, eta_g = Problem(), 3, 0.02, 0.01, 0.3, 0.9, 1e-3, 1.0
    sampled = [[0, 1, 2], [0, 2], [1]]
    alg = make("fafed", weight_decay=wd, alpha=a, beta2=b2, rho=rho, server_lr=eta_g)
    x, server = run_fafed(alg, problem, 3, K, lr, sampled)

    def grad(vec, i):
        return problem.flat_grad(vec, i) + wd * vec

    ref = flatten(problem.x0())
    m_bar = v_bar = None
    for r in range(3):
        ys, ms, vs = [], [], []
        for i in sampled[r]:
            y = ref.clone()
            steps = range(K)
            if m_bar is None:  # first round: step 1 initialises m, v and H from g(x_0)
                m = grad(y, i)
                v = m**2
                steps = range(K - 1)
            else:
                m, v = m_bar.clone(), v_bar.clone()
            h = v.sqrt() + rho
            for _ in steps:
                y_old, y = y, y - lr * m / h
                g_new = grad(y, i)
                m = g_new + (1 - a) * (m - grad(y_old, i))
                v = b2 * v + (1 - b2) * g_new**2
            ys.append(y), ms.append(m), vs.append(v)
        ref = ref + eta_g * (torch.stack(ys).mean(0) - ref)
        m_bar, v_bar = torch.stack(ms).mean(0), torch.stack(vs).mean(0)
    assert_close(x, ref, tol=1e-12)
    assert_close(server["m"], m_bar, tol=1e-12)
    assert_close(server["v"], v_bar, tol=1e-12)


def test_fafed_h_is_fixed_within_a_round() -> None:
    # With alpha = 1, m = g(y) and FAFED is preconditioned GD with H from the round start.
    problem, lr, rho = Problem(), 0.05, 1e-3
    alg = make("fafed", weight_decay=0.0, alpha=1.0, beta2=0.5, rho=rho)
    x0 = problem.x0()
    server = {"m": [torch.zeros_like(t) for t in x0], "v": [torch.full_like(t, 4.0) for t in x0]}
    info = RoundInfo(1, lr, 2, problem.N, 1)
    local = alg.client_begin(x0, server, None, info)
    y = [t.clone() for t in x0]
    for k in (1, 2):
        alg.local_step_with_oracle(y, lambda: problem.grad(y, 0), local, k, info)
    # step 1 moves with m_bar = 0; step 2 with m = g(x0), both over H = 2 + rho
    expected = flatten(x0) - lr * problem.flat_grad(flatten(x0), 0) / (2.0 + rho)
    assert_close(y, expected, tol=1e-12)
    assert_close(local["h"], torch.full_like(expected, 2.0 + rho), tol=0)
    assert unflatten(expected)[0].shape == x0[0].shape


def test_fafed_counts_and_refuses_the_single_gradient_contract() -> None:
    alg = make("fafed")
    assert alg.comm_up() == alg.comm_down() == 3 * alg.spec.d
    assert type(alg).gradients_per_step == 2 and not type(alg).supports_vectorized
    with pytest.raises(TypeError, match="oracle"):
        alg.local_step([], [], {}, 1, RoundInfo(0, 0.1, 1, 1, 1))


def test_fedcada_refuses_with_the_reason() -> None:
    with pytest.raises(FedbenchError, match=r"^not implemented: FedCAda"):
        make("fedcada")


def test_fafed_defaults() -> None:
    p = make("fafed").params
    assert (p.lr, p.alpha, p.beta2, p.rho, p.weight_decay, p.server_lr) == (
        0.01,
        0.1,
        0.999,
        0.1,
        1e-3,
        1.0,
    )
