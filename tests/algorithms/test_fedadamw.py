"""fedadamw (FedAdamW Algorithm 2): block-mean v restored on the clients, v bias-corrected with
the global t, alignment alpha * Delta_G with the next round's lr, decoupled decay."""

from collections.abc import Callable

import pytest
import torch

from tests.algorithms.harness import (
    EPS,
    SHAPES,
    Problem,
    assert_close,
    expand_tensor_means,
    flatten,
    make,
    run_federated,
    tensor_means,
)
from tests.algorithms.test_local_adamw import local_adamw_reference


def fedadamw_by_hand(
    problem: Problem,
    lrs: list[float],
    K: int,
    *,
    wd: float,
    alpha: float,
    b1: float,
    b2: float,
    v_bias_correction: str = "global",
    m_agg: bool = False,
    denominator: Callable[[torch.Tensor], torch.Tensor] = lambda v_hat: v_hat.sqrt() + EPS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Flat re-statement of Algorithm 2 (blocks: tensor); `denominator` maps v_hat to the
    divisor of m_hat (DP-FedAdamW changes only that). With `m_agg` (Agg-m), m starts from the
    mean of the clients' last m and m_hat is corrected with the global t. Returns (x, v_bar)."""
    ref = flatten(problem.x0())
    v_bar = torch.zeros(len(SHAPES), dtype=torch.float64)
    m_bar = torch.zeros_like(ref)
    delta_g = torch.zeros_like(ref)
    for r, lr in enumerate(lrs):
        deltas, blocks, ms = [], [], []
        for i in range(problem.N):
            y, v = ref.clone(), expand_tensor_means(v_bar)
            m = m_bar.clone() if m_agg else torch.zeros_like(ref)
            for k in range(1, K + 1):
                t = {"global": r * K + k, "local": k, "none": None}[v_bias_correction]
                g = problem.flat_grad(y, i)
                m = b1 * m + (1 - b1) * g
                v = b2 * v + (1 - b2) * g**2
                m_hat = m / (1 - b1 ** (r * K + k if m_agg else k))
                v_hat = v if t is None else v / (1 - b2**t)
                y = y - lr * (m_hat / denominator(v_hat) + alpha * delta_g + wd * y)
            deltas.append(y - ref)
            blocks.append(tensor_means(v))
            ms.append(m)
        delta_bar = torch.stack(deltas).mean(0)
        ref = ref + delta_bar
        delta_g = -delta_bar / (K * lr)
        v_bar = torch.stack(blocks).mean(0)
        m_bar = torch.stack(ms).mean(0)
    return ref, v_bar


def test_fedadamw_three_rounds_by_hand() -> None:
    problem, K, wd, alpha, b1, b2 = Problem(), 3, 0.05, 0.5, 0.8, 0.95
    lrs = [0.02, 0.01, 0.015]
    alg = make("fedadamw", weight_decay=wd, alpha=alpha, beta1=b1, beta2=b2, eps=EPS)
    x, server, _ = run_federated(alg, problem, rounds=3, local_steps=K, lr=lambda r: lrs[r])
    ref, v_bar = fedadamw_by_hand(problem, lrs, K, wd=wd, alpha=alpha, b1=b1, b2=b2)
    assert_close(x, ref)
    assert_close(server["v_bar"], v_bar)


@pytest.mark.parametrize(
    ("fields", "hand"),
    [
        ({"m_agg": True}, {"m_agg": True}),  # Agg-m: m from m_bar, m_hat with t
        ({"v_bias_correction": "none"}, {"v_bias_correction": "none"}),  # v_hat = v
    ],
    ids=["agg-m", "no-v-correction"],
)
def test_fedadamw_switches_by_hand(fields: dict, hand: dict) -> None:
    problem, K, wd, alpha, b1, b2 = Problem(), 3, 0.05, 0.5, 0.8, 0.95
    lrs = [0.02, 0.01, 0.015]
    alg = make("fedadamw", weight_decay=wd, alpha=alpha, beta1=b1, beta2=b2, eps=EPS, **fields)
    x, server, _ = run_federated(alg, problem, rounds=3, local_steps=K, lr=lambda r: lrs[r])
    ref, v_bar = fedadamw_by_hand(problem, lrs, K, wd=wd, alpha=alpha, b1=b1, b2=b2, **hand)
    assert_close(x, ref)
    assert_close(server["v_bar"], v_bar)


def test_fedadamw_local_v_bias_correction_by_hand() -> None:
    """v_bias_correction local: v_hat = v / (1 - b2^k) although v starts from v_bar."""
    problem, K, wd, alpha, b1, b2 = Problem(), 3, 0.05, 0.5, 0.8, 0.95
    lrs = [0.02, 0.01, 0.015]
    alg = make(
        "fedadamw",
        weight_decay=wd,
        alpha=alpha,
        beta1=b1,
        beta2=b2,
        eps=EPS,
        v_bias_correction="local",
    )
    x, _, _ = run_federated(alg, problem, rounds=3, local_steps=K, lr=lambda r: lrs[r])
    ref, _ = fedadamw_by_hand(
        problem, lrs, K, wd=wd, alpha=alpha, b1=b1, b2=b2, v_bias_correction="local"
    )
    assert_close(x, ref)


def test_fedadamw_without_alignment_and_aggregation_is_local_adamw() -> None:
    # FedAdamW Table 7: alpha 0, v_agg none, m_agg false must equal local_adamw exactly.
    problem, K, lr, wd = Problem(), 4, 0.02, 0.05
    alg = make("fedadamw", weight_decay=wd, alpha=0.0, v_agg="none", beta1=0.8, beta2=0.95, eps=EPS)
    x, _, _ = run_federated(alg, problem, rounds=2, local_steps=K, lr=lr)
    ref = local_adamw_reference(problem, 2, K, lr, wd, (0.8, 0.95), EPS)
    assert_close(x, ref)
    assert alg.comm_up() == 8.0
