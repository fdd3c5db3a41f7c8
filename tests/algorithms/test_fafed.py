"""fafed: client STORM momentum with a shared adaptive matrix fixed within a round; x, m, v
averaged every round (FAFED, AAAI 2023)."""

from __future__ import annotations

import pytest
import torch

from fedbench.algorithms import RoundInfo
from fedbench.algorithms.base import StepOracle
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
                oracle = StepOracle(lambda i=i, y=y: problem.grad(y, i))
                alg.local_step_with_oracle(y, oracle, local, k, info)
            upload, state = alg.client_end(y, x, local, None, info)
            assert state is None  # non-sampled clients keep nothing
            for key, ts in upload.items():
                sums[key] = [a + b for a, b in zip(sums[key], ts)] if key in sums else ts
        mean = {k: [t / len(sampled[r]) for t in v] for k, v in sums.items()}
        alg.server_update(x, mean, server, info)
    return x, server


def test_fafed_three_rounds_by_hand_with_partial_participation() -> None:
    """Round 0 is the initial exchange (one plain SGD step on g(x_0), m_0 and v_0 averaged);
    later steps compute m at the current point, then move; after a round the next first step
    uses the clients' mean point before their last step as its previous point."""
    problem, K, lr, wd, a, b2, rho, eta_g = Problem(), 3, 0.02, 0.01, 0.3, 0.9, 1e-3, 0.7
    sampled = [[0, 1, 2], [0, 2], [1]]
    alg = make("fafed", weight_decay=wd, alpha=a, beta2=b2, rho=rho, server_lr=eta_g)
    x, server = run_fafed(alg, problem, 3, K, lr, sampled)

    def grad(vec, i):
        return problem.flat_grad(vec, i) + wd * vec

    ref = flatten(problem.x0())
    m_bar = v_bar = x_prev = None
    for r in range(3):
        ys, pres, ms, vs = [], [], [], []
        for i in sampled[r]:
            if m_bar is None:  # round 0: m = g(x_0), v = g^2, one SGD step, nothing else
                m = grad(ref, i)
                v, pre, y = m**2, ref, ref - lr * m
            else:
                m, v, y, prev = m_bar.clone(), v_bar.clone(), ref.clone(), x_prev
                h = v_bar.sqrt() + rho
                for _ in range(K):
                    g_new = grad(y, i)
                    m = g_new + (1 - a) * (m - grad(prev, i))
                    v = b2 * v + (1 - b2) * g_new**2
                    prev, pre, y = y, y, y - lr * m / h
            ys.append(y), pres.append(pre), ms.append(m), vs.append(v)
        # the previous point: the same server step applied to the points before the last step
        x_prev = ref + eta_g * (torch.stack(pres).mean(0) - ref)
        ref = ref + eta_g * (torch.stack(ys).mean(0) - ref)
        m_bar, v_bar = torch.stack(ms).mean(0), torch.stack(vs).mean(0)
    assert_close(x, ref, tol=1e-12)
    assert_close(server["m"], m_bar, tol=1e-12)
    assert_close(server["v"], v_bar, tol=1e-12)
    assert_close(server["x_prev"], x_prev, tol=1e-12)


def test_fafed_with_one_client_is_the_public_codes_loop() -> None:
    """One worker, communication every K steps: the public code's loop (initial gradient step,
    then m at the current point against the previous point, H refreshed from v at each
    communication) with no break at the rounds."""
    problem, K, lr, a, b2, rho, rounds = Problem(clients=1), 4, 0.05, 0.2, 0.8, 0.01, 4
    alg = make("fafed", clients=1, weight_decay=0.0, alpha=a, beta2=b2, rho=rho)
    x, _ = run_fafed(alg, problem, rounds, K, lr, [[0]] * rounds)

    def grad(vec):
        return problem.flat_grad(vec, 0)

    prev = flatten(problem.x0())
    m = grad(prev)
    v = m**2
    h = v.sqrt() + rho
    cur = prev - lr * m
    for _ in range((rounds - 1) * K):
        g_new = grad(cur)
        m = g_new + (1 - a) * (m - grad(prev))
        v = b2 * v + (1 - b2) * g_new**2
        prev, cur = cur, cur - lr * m / h
        if _ % K == K - 1:  # a communication
            h = v.sqrt() + rho
    assert_close(x, cur, tol=1e-12)


def test_fafed_h_is_fixed_within_a_round() -> None:
    # With alpha = 1, m = g(y) and FAFED is preconditioned GD with H from the round start.
    problem, lr, rho = Problem(), 0.05, 1e-3
    alg = make("fafed", weight_decay=0.0, alpha=1.0, beta2=0.5, rho=rho)
    x0 = problem.x0()
    server = {
        "m": [torch.zeros_like(t) for t in x0],
        "v": [torch.full_like(t, 4.0) for t in x0],
        "x_prev": [t.clone() for t in x0],
    }
    info = RoundInfo(1, lr, 2, problem.N, 1)
    local = alg.client_begin(x0, server, None, info)
    y = [t.clone() for t in x0]
    for k in (1, 2):
        alg.local_step_with_oracle(y, StepOracle(lambda: problem.grad(y, 0)), local, k, info)
    # step 1 moves with g(x0), step 2 with g(y1), both over H = 2 + rho although v changed
    y1 = flatten(x0) - lr * problem.flat_grad(flatten(x0), 0) / (2.0 + rho)
    expected = y1 - lr * problem.flat_grad(y1, 0) / (2.0 + rho)
    assert_close(y, expected, tol=1e-12)
    assert_close(local["h"], torch.full_like(expected, 2.0 + rho), tol=0)
    assert_close(local["y_prev"], y1, tol=1e-12)
    assert unflatten(expected)[0].shape == x0[0].shape


def test_fafed_counts_and_refuses_the_single_gradient_contract() -> None:
    alg = make("fafed")
    assert alg.comm_up() == 3 * alg.spec.d  # Delta, m, v
    assert alg.comm_down() == 4 * alg.spec.d  # x, m_bar, v_bar, x_prev
    # Both gradients come from the executor's oracle, so the stacked executor takes it too.
    assert type(alg).gradients_per_step == 2 and type(alg).supports_vectorized
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
