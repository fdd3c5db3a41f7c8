"""FedAdamW switches computed by hand on list-of-tensor parameters: global blocks, full v
aggregation, coupled decay, the v bias correction, communication counts."""

import pytest
import torch

from fedbench.algorithms import RoundInfo
from fedbench.algorithms.blocks import build_partition
from tests.algorithms.harness import EPS, SHAPES, Problem, assert_close, make, run_federated

B1, B2 = 0.9, 0.999


def fedadamw_by_hand(problem, lrs, K, *, alpha, lam, blocks="tensor", v_agg="block_mean"):
    """Plain re-statement of the rule: v from expanded block means, m from 0, m_hat with local k,
    v_hat with global t = r*K + k, decoupled decay, alignment alpha * Delta_G."""
    x = problem.x0()
    v_bar = None  # block means, or full v
    delta_g = [torch.zeros_like(t) for t in x]
    for r, lr in enumerate(lrs):
        deltas, v_uploads = [], []
        for i in range(problem.N):
            y = [t.clone() for t in x]
            m = [torch.zeros_like(t) for t in x]
            if v_bar is None or v_agg == "none":
                v = [torch.zeros_like(t) for t in x]
            elif v_agg == "full":
                v = [t.clone() for t in v_bar]
            elif blocks == "tensor":
                v = [torch.full_like(t, float(b)) for t, b in zip(x, v_bar)]
            else:  # global
                v = [torch.full_like(t, float(v_bar[0])) for t in x]
            for k in range(1, K + 1):
                t_glob = r * K + k
                g = problem.grad(y, i)
                m = [B1 * mi + (1 - B1) * gi for mi, gi in zip(m, g)]
                v = [B2 * vi + (1 - B2) * gi * gi for vi, gi in zip(v, g)]
                t_v = k if v_agg == "none" else t_glob
                y = [
                    yi
                    - lr
                    * (
                        (mi / (1 - B1**k)) / ((vi / (1 - B2**t_v)).sqrt() + EPS)
                        + alpha * dg
                        + lam * yi
                    )
                    for yi, mi, vi, dg in zip(y, m, v, delta_g)
                ]
            deltas.append([yi - xi for yi, xi in zip(y, x)])
            if v_agg == "full":
                v_uploads.append(v)
            elif blocks == "tensor":
                v_uploads.append([vi.mean() for vi in v])
            else:
                v_uploads.append([sum(vi.sum() for vi in v) / sum(vi.numel() for vi in v)])
        mean_delta = [sum(d[j] for d in deltas) / len(deltas) for j in range(len(x))]
        x = [xi + di for xi, di in zip(x, mean_delta)]
        delta_g = [-di / (K * lr) for di in mean_delta]
        v_bar = [sum(u[j] for u in v_uploads) / len(v_uploads) for j in range(len(v_uploads[0]))]
    return x, v_bar


def _lr_of(lrs):
    return lambda r: lrs[r]


@pytest.mark.parametrize("blocks", ["tensor", "global"])
def test_fedadamw_three_rounds_by_hand(blocks):
    problem = Problem()
    lrs, K = [1e-2, 8e-3, 5e-3], 2
    alg = make("fedadamw", weight_decay=0.05, alpha=0.5, blocks=blocks, eps=EPS)
    got, server, _ = run_federated(alg, problem, rounds=3, local_steps=K, lr=_lr_of(lrs))
    expected, v_bar = fedadamw_by_hand(problem, lrs, K, alpha=0.5, lam=0.05, blocks=blocks)
    assert_close(got, torch.cat([t.reshape(-1) for t in expected]))
    assert_close(server["v_bar"], torch.stack(v_bar))


def test_fedadamw_full_v_aggregation_by_hand():
    problem = Problem()
    lrs, K = [1e-2, 5e-3], 3
    alg = make("fedadamw", weight_decay=0.01, alpha=0.3, v_agg="full", eps=EPS)
    got, server, _ = run_federated(alg, problem, rounds=2, local_steps=K, lr=_lr_of(lrs))
    expected, v_bar = fedadamw_by_hand(problem, lrs, K, alpha=0.3, lam=0.01, v_agg="full")
    assert_close(got, torch.cat([t.reshape(-1) for t in expected]))
    assert_close(server["v_bar"], torch.cat([t.reshape(-1) for t in v_bar]))


def test_fedadamw_no_v_aggregation_by_hand():
    """v_agg none: v restarts from 0 every round and is bias-corrected with the local k."""
    problem = Problem()
    lrs, K = [1e-2, 5e-3, 2e-3], 3
    alg = make("fedadamw", weight_decay=0.02, alpha=0.4, v_agg="none", eps=EPS)
    got, _, _ = run_federated(alg, problem, rounds=3, local_steps=K, lr=_lr_of(lrs))
    expected, _ = fedadamw_by_hand(problem, lrs, K, alpha=0.4, lam=0.02, v_agg="none")
    assert_close(got, torch.cat([t.reshape(-1) for t in expected]))


def test_alpha0_no_v_agg_equals_local_adamw():
    problem = Problem()
    lrs, K = [1e-2, 5e-3, 2e-3], 3
    a, _, _ = run_federated(
        make("fedadamw", alpha=0.0, v_agg="none", weight_decay=0.02, eps=EPS),
        problem,
        rounds=3,
        local_steps=K,
        lr=_lr_of(lrs),
    )
    b, _, _ = run_federated(
        make("local_adamw", weight_decay=0.02, eps=EPS),
        problem,
        rounds=3,
        local_steps=K,
        lr=_lr_of(lrs),
    )
    assert_close(a, torch.cat([t.reshape(-1) for t in b]))


def test_coupled_decay_switch_matches_hand_rule():
    """decoupled false (A3): lambda*y enters g before the moments (k = t = 1: m_hat = g,
    v_hat = g^2)."""
    problem = Problem(clients=1)
    lam, lr = 0.5, 1e-2
    got, _, _ = run_federated(
        make("fedadamw", alpha=0.0, decoupled=False, weight_decay=lam, eps=EPS, clients=1),
        problem,
        rounds=1,
        local_steps=1,
        lr=lr,
    )
    x0 = problem.x0()
    g = [gi + lam * xi for gi, xi in zip(problem.grad(x0, 0), x0)]
    expected = [xi - lr * gi / (gi.abs() + EPS) for xi, gi in zip(x0, g)]
    assert_close(got, torch.cat([t.reshape(-1) for t in expected]))


def test_communication_counts():
    d, n_blocks = 8, 2  # W (3x2) and b (2): one block per tensor
    assert make("fedadamw").comm_up() == d + n_blocks
    assert make("fedadamw").comm_down() == 2 * d + n_blocks
    assert make("fedadamw", alpha=0.0).comm_down() == d + n_blocks
    assert make("fedadamw", v_agg="full").comm_up() == 2 * d
    assert make("fedadamw", v_agg="none").comm_up() == d
    assert make("fedadamw", v_agg="full", m_agg=True).comm_up() == 3 * d
    assert make("fedadamw", v_agg="full", m_agg=True).comm_down() == 4 * d
    assert make("fedadamw", blocks="global").comm_up() == d + 1


def _first_step_of_round_two(v_bias_correction: str, K: int, lr: float):
    """Round 1 through the driver (both corrections agree there: v starts at 0, so t = k), then
    client 0's first local step of round 2; returns (x after round 1, y after that step, v)."""
    problem = Problem()
    alg = make(
        "fedadamw", alpha=0.0, weight_decay=0.0, eps=EPS, v_bias_correction=v_bias_correction
    )
    x, server, _ = run_federated(alg, problem, rounds=1, local_steps=K, lr=lr)
    info = RoundInfo(1, lr, K, problem.N, problem.N)
    local = alg.client_begin(x, server, None, info)
    y = [t.clone() for t in x]
    alg.local_step(y, problem.grad(y, 0), local, 1, info)
    return x, y, local["v"]


def test_global_bias_correction_keeps_v_hat_at_the_gradient_scale():
    """With v started from v_bar, the local-k correction divides by 1 - beta2 (v_hat inflated
    (1 - beta2^(K+1)) / (1 - beta2) ~ K+1 times, steps ~sqrt(K+1) times smaller); the global t
    keeps v_hat at the scale of g^2, so the first step of a round is Adam's usual size."""
    K, lr = 9, 1e-2
    x, y_glob, v = _first_step_of_round_two("global", K, lr)
    x_loc, y_loc, v_loc = _first_step_of_round_two("local", K, lr)
    assert_close(x_loc, torch.cat([t.reshape(-1) for t in x]))  # round 1 identical
    assert_close(v_loc, torch.cat([t.reshape(-1) for t in v]))
    g = torch.cat([t.reshape(-1) for t in Problem().grad(x, 0)])
    m_hat = g  # k = 1: m = (1 - beta1) g, m_hat = m / (1 - beta1)
    flat_v, flat_x = torch.cat([t.reshape(-1) for t in v]), torch.cat([t.reshape(-1) for t in x])
    v_hat_glob, v_hat_loc = flat_v / (1 - B2 ** (K + 1)), flat_v / (1 - B2)
    assert_close(y_glob, flat_x - lr * m_hat / (v_hat_glob.sqrt() + EPS))
    assert_close(y_loc, flat_x - lr * m_hat / (v_hat_loc.sqrt() + EPS))
    # The claim itself: v_hat_glob is within 2x of g^2 on average; the local one is ~K+1 larger,
    # and every coordinate's step is more than twice smaller.
    assert 0.5 < float((v_hat_glob / g**2).median()) < 2.0
    assert float((v_hat_loc / v_hat_glob).min()) == pytest.approx(
        (1 - B2 ** (K + 1)) / (1 - B2), rel=1e-12
    )
    step_glob = (torch.cat([t.reshape(-1) for t in y_glob]) - flat_x).abs()
    step_loc = (torch.cat([t.reshape(-1) for t in y_loc]) - flat_x).abs()
    assert torch.all(step_loc < step_glob / 2)


def test_v_block_means_are_the_restored_v_bar_at_round_start():
    problem = Problem()
    alg = make("fedadamw", eps=EPS)
    _, server, _ = run_federated(alg, problem, rounds=1, local_steps=2, lr=1e-2)
    local = alg.client_begin(problem.x0(), server, None, RoundInfo(1, 1e-2, 2, 3, 3))
    assert_close(alg.v_block_means(local), server["v_bar"])
    assert float(server["v_bar"].min()) > 0


def test_block_partition_means_and_expand():
    part = build_partition("tensor", SHAPES)
    v = [torch.arange(6.0).reshape(3, 2), torch.tensor([1.0, 3.0])]
    means = part.means(v)
    torch.testing.assert_close(means, torch.tensor([2.5, 2.0]))
    expanded = part.expand(means)
    assert expanded[0].shape == (3, 2) and torch.all(expanded[0] == 2.5)
    assert torch.all(expanded[1] == 2.0)
    whole = build_partition("global", SHAPES)
    torch.testing.assert_close(whole.means(v), torch.tensor([19.0 / 8]))
