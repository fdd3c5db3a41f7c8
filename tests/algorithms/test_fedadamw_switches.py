"""FedAdamW switches computed by hand on list-of-tensor parameters: global blocks, full v aggregation, coupled decay, communication counts."""

import pytest
import torch

from fedbench.algorithms.blocks import build_partition
from tests.algorithms.listdriver import (
    SHAPES,
    assert_close,
    build,
    grad,
    initial_x,
    make_clients,
    simulate,
)

B1, B2, EPS = 0.9, 0.999, 1e-8


def fedadamw_by_hand(x0, clients, lrs, K, *, alpha, lam, blocks="tensor", v_agg="block_mean"):
    """Plain re-statement of the rule: v from expanded block means, m from 0, m_hat with local k,
    v_hat with global t = r*K + k, decoupled decay, alignment alpha * Delta_G."""
    x = [t.clone() for t in x0]
    v_bar = None  # block means, or full v
    delta_g = [torch.zeros_like(t) for t in x]
    for r, lr in enumerate(lrs):
        deltas, v_uploads = [], []
        for data in clients:
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
                g = grad(y, data)
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
    return x


@pytest.mark.parametrize("blocks", ["tensor", "global"])
def test_fedadamw_three_rounds_by_hand(blocks):
    clients, x0 = make_clients(), initial_x()
    lrs, K = [1e-2, 8e-3, 5e-3], 2
    algo = build("fedadamw", weight_decay=0.05, alpha=0.5, blocks=blocks)
    got = simulate(algo, x0, clients, rounds=3, local_steps=K, lrs=lrs)
    expected = fedadamw_by_hand(x0, clients, lrs, K, alpha=0.5, lam=0.05, blocks=blocks)
    assert_close(got, expected)


def test_fedadamw_full_v_aggregation_by_hand():
    clients, x0 = make_clients(), initial_x()
    lrs, K = [1e-2, 5e-3], 3
    algo = build("fedadamw", weight_decay=0.01, alpha=0.3, v_agg="full")
    got = simulate(algo, x0, clients, rounds=2, local_steps=K, lrs=lrs)
    assert_close(got, fedadamw_by_hand(x0, clients, lrs, K, alpha=0.3, lam=0.01, v_agg="full"))


def test_alpha0_no_v_agg_equals_local_adamw():
    clients, x0 = make_clients(), initial_x()
    lrs, K = [1e-2, 5e-3, 2e-3], 3
    a = simulate(
        build("fedadamw", alpha=0.0, v_agg="none", weight_decay=0.02),
        x0,
        clients,
        rounds=3,
        local_steps=K,
        lrs=lrs,
    )
    b = simulate(
        build("local_adamw", weight_decay=0.02), x0, clients, rounds=3, local_steps=K, lrs=lrs
    )
    assert_close(a, b, tol=1e-12)


def test_coupled_decay_switch_differs_and_matches_hand_rule():
    """decoupled false (A3): lambda*y enters g before the moments."""
    clients, x0 = make_clients(n_clients=1), initial_x()
    lam, lr = 0.5, 1e-2
    got = simulate(
        build("fedadamw", alpha=0.0, decoupled=False, weight_decay=lam),
        x0,
        clients,
        rounds=1,
        local_steps=1,
        lrs=[lr],
    )
    g = [gi + lam * xi for gi, xi in zip(grad(x0, clients[0]), x0)]
    expected = [xi - lr * gi / (gi.abs() + EPS) for xi, gi in zip(x0, g)]
    assert_close(got, expected)


def test_communication_counts():
    d, n_blocks = 8, 2  # W (2x3) and b (2): one block per tensor
    assert build("fedadamw").comm_up() == d + n_blocks
    assert build("fedadamw").comm_down() == 2 * d + n_blocks
    assert build("fedadamw", v_agg="full").comm_up() == 2 * d
    assert build("fedadamw", v_agg="none").comm_up() == d
    assert build("fedadamw", v_agg="full", m_agg=True).comm_up() == 3 * d
    assert build("fedadamw", blocks="global").comm_up() == d + 1


def test_global_bias_correction_keeps_first_step_small():
    """With v started from v_bar, the local-k correction inflates v_hat; global t does not."""
    clients, x0 = make_clients(), initial_x()
    lrs, K = [1e-2, 1e-2], 2
    glob = simulate(
        build("fedadamw", alpha=0.0, weight_decay=0.0),
        x0,
        clients,
        rounds=2,
        local_steps=K,
        lrs=lrs,
    )
    loc = simulate(
        build("fedadamw", alpha=0.0, weight_decay=0.0, v_bias_correction="local"),
        x0,
        clients,
        rounds=2,
        local_steps=K,
        lrs=lrs,
    )
    # Round 1 is identical (v starts at 0); round 2 differs because v_hat is inflated with k.
    assert not torch.allclose(glob[0], loc[0])


def test_block_partition_means_and_expand():
    part = build_partition("tensor", SHAPES)
    v = [torch.arange(6.0).reshape(2, 3), torch.tensor([1.0, 3.0])]
    means = part.means(v)
    torch.testing.assert_close(means, torch.tensor([2.5, 2.0]))
    expanded = part.expand(means)
    assert expanded[0].shape == (2, 3) and torch.all(expanded[0] == 2.5)
    whole = build_partition("global", SHAPES)
    torch.testing.assert_close(whole.means(v), torch.tensor([19.0 / 8]))
