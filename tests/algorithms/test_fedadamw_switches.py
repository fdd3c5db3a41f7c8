"""FedAdamW's switches beyond the rounds that test_fedadamw.py computes by hand: communication
counts, what the v and m bias corrections do to a round's first step, the restored v, and the
block partitions."""

import pytest
import torch

from fedbench.algorithms import RoundInfo
from fedbench.algorithms.blocks import build_partition
from tests.algorithms.harness import (
    EPS,
    SHAPES,
    Problem,
    assert_close,
    flatten,
    make,
    run_federated,
)

B1, B2 = 0.9, 0.999


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
    assert_close(x_loc, flatten(x))  # round 1 identical
    assert_close(v_loc, flatten(v))
    g = flatten(Problem().grad(x, 0))
    m_hat = g  # k = 1: m = (1 - beta1) g, m_hat = m / (1 - beta1)
    flat_v, flat_x = flatten(v), flatten(x)
    v_hat_glob, v_hat_loc = flat_v / (1 - B2 ** (K + 1)), flat_v / (1 - B2)
    assert_close(y_glob, flat_x - lr * m_hat / (v_hat_glob.sqrt() + EPS))
    assert_close(y_loc, flat_x - lr * m_hat / (v_hat_loc.sqrt() + EPS))
    # The claim itself: v_hat_glob is within 2x of g^2 on average; the local one is ~K+1 larger,
    # and every coordinate's step is more than twice smaller.
    assert 0.5 < float((v_hat_glob / g**2).median()) < 2.0
    assert float((v_hat_loc / v_hat_glob).min()) == pytest.approx(
        (1 - B2 ** (K + 1)) / (1 - B2), rel=1e-12
    )
    step_glob = (flatten(y_glob) - flat_x).abs()
    step_loc = (flatten(y_loc) - flat_x).abs()
    assert torch.all(step_loc < step_glob / 2)


def test_global_m_correction_shrinks_the_first_step_of_a_later_round() -> None:
    """With m from zero and t = r*K + 1, m_hat = (1-b1)*g / (1 - b1^t): about 0.1x local's g."""
    problem, K = Problem(), 5
    first_steps = []
    for form in ("local", "global"):
        alg = make("fedadamw", m_bias_correction=form, alpha=0.0, weight_decay=0.0, eps=EPS)
        x, server, _ = run_federated(alg, problem, rounds=1, local_steps=K, lr=0.01)
        info = RoundInfo(1, 0.01, K, problem.N, problem.N)
        local = alg.client_begin(x, server, None, info)
        y = [t.clone() for t in x]
        alg.local_step(y, problem.grad(y, 0), local, 1, info)
        first_steps.append((flatten(y) - flatten(x)).norm())
    ratio = float(first_steps[1] / first_steps[0])
    assert ratio == pytest.approx(0.1 / (1 - 0.9 ** (K + 1)), rel=1e-9)


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
