"""fedadamw (FedAdamW Algorithm 2) against the one hand-computed float64 reference of its rule,
with every switch: blocks, v_agg, m_agg, decoupled, v_bias_correction, m_bias_correction,
alignment (additive Algorithm 2 / convex Algorithm 3, FedAdamW Table 11), and DP-FedAdamW's
denominator. Compared at TOL = 1e-12 (eps 1e-3, so that eps shows)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from fedbench.errors import FedbenchError
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
    alpha: float = 0.5,
    weight_decay: float = 0.01,
    beta1: float = 0.9,
    beta2: float = 0.999,
    eps: float = EPS,
    blocks: str = "tensor",
    v_agg: str = "block_mean",
    m_agg: bool = False,
    decoupled: bool = True,
    v_bias_correction: str = "global",
    m_bias_correction: str = "local",
    alignment: str = "additive",
    denominator: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """FedAdamW on flat vectors, one round per lr (keywords: the config's fields). Client i of
    round r: y = x, m = 0 (m_bar with m_agg), v = the expanded block means of v_bar (all of v_bar
    with v_agg full, 0 with v_agg none); local step k, t = r*K + k:
        g <- g + lambda*y                                   (decoupled false only)
        m <- b1*m + (1-b1)*g ;  v <- b2*v + (1-b2)*g^2
        m_hat = m / (1 - b1^(t if m_agg or m_bias_correction global else k))
        v_hat = v / (1 - b2^(k if v_bias_correction local or v_agg none else t)), or v (none)
        additive: y <- y - lr*(      m_hat/D +     alpha*Delta_G + lambda*y)
        convex:   y <- y - lr*(alpha*m_hat/D + (1-alpha)*Delta_G + lambda*y)
    with D = sqrt(v_hat) + eps (or `denominator(v_hat)`, DP-FedAdamW) and the lambda*y term only
    when decoupled. Server: x <- x + Delta_bar, Delta_G <- -Delta_bar / (K*lr), v_bar <- the mean
    upload of v (block means, or all of v), m_bar <- the mean m. Returns (x, v_bar)."""
    if denominator is None:
        denominator = lambda v_hat: v_hat.sqrt() + eps  # noqa: E731
    d = sum(s.numel() for s in SHAPES)
    means = tensor_means if blocks == "tensor" else lambda v: v.mean().reshape(1)
    expand = expand_tensor_means if blocks == "tensor" else lambda b: b.expand(d).clone()
    adaptive, align = (alpha, 1 - alpha) if alignment == "convex" else (1.0, alpha)
    x = flatten(problem.x0())
    n_blocks = len(SHAPES) if blocks == "tensor" else 1
    v_bar = torch.zeros(d if v_agg == "full" else n_blocks, dtype=torch.float64)
    m_bar, delta_g = torch.zeros_like(x), torch.zeros_like(x)
    for r, lr in enumerate(lrs):
        deltas, v_uploads, m_uploads = [], [], []
        for i in range(problem.N):
            y = x.clone()
            m = m_bar.clone() if m_agg else torch.zeros_like(x)
            if v_agg == "block_mean":
                v = expand(v_bar)
            elif v_agg == "full":
                v = v_bar.clone()
            else:
                v = torch.zeros_like(x)
            for k in range(1, K + 1):
                t = r * K + k
                g = problem.flat_grad(y, i)
                if not decoupled:
                    g = g + weight_decay * y
                m = beta1 * m + (1 - beta1) * g
                v = beta2 * v + (1 - beta2) * g**2
                m_hat = m / (1 - beta1 ** (t if m_agg or m_bias_correction == "global" else k))
                if v_bias_correction == "none":
                    v_hat = v
                elif v_bias_correction == "local" or v_agg == "none":
                    v_hat = v / (1 - beta2**k)
                else:
                    v_hat = v / (1 - beta2**t)
                decay = weight_decay * y if decoupled else 0.0
                y = y - lr * (adaptive * m_hat / denominator(v_hat) + align * delta_g + decay)
            deltas.append(y - x)
            v_uploads.append(v if v_agg == "full" else means(v))
            m_uploads.append(m)
        delta_bar = torch.stack(deltas).mean(0)
        x = x + delta_bar
        delta_g = -delta_bar / (K * lr)
        v_bar = torch.stack(v_uploads).mean(0)
        m_bar = torch.stack(m_uploads).mean(0)
    return x, v_bar


#: Three rounds with a changing lr (Delta_G of round r is applied with round r+1's lr).
LRS = [0.02, 0.01, 0.015]
#: The Adam settings of most cases: b2 0.95 so that v's correction differs visibly from 1.
MOMENTS = {"alpha": 0.5, "weight_decay": 0.05, "beta1": 0.8, "beta2": 0.95}
#: Each case: the config fields (the reference takes the same ones), lrs, K, clients.
CASES: dict[str, tuple[dict[str, Any], list[float], int, int]] = {
    "algorithm2": (MOMENTS, LRS, 3, 3),
    "agg-m": ({**MOMENTS, "m_agg": True}, LRS, 3, 3),
    "no-v-correction": ({**MOMENTS, "v_bias_correction": "none"}, LRS, 3, 3),
    "local-v-correction": ({**MOMENTS, "v_bias_correction": "local"}, LRS, 3, 3),
    # Table 11's "FedAdamW (Algorithm 3)": beta1 0, no weight decay, convex alignment.
    "algorithm3": (
        {"alignment": "convex", "alpha": 0.3, "beta1": 0.0, "weight_decay": 0.0, "beta2": 0.95},
        LRS,
        3,
        3,
    ),
    # Convex with momentum and decay: the decay is not scaled by alpha.
    "convex-decay": ({**MOMENTS, "alignment": "convex", "alpha": 0.3}, LRS, 3, 3),
    "m-global": ({**MOMENTS, "m_bias_correction": "global"}, LRS, 3, 3),
    # The public-code form: full v restored coordinate by coordinate, m corrected with t.
    "public-code": (
        {"m_bias_correction": "global", "v_agg": "full", "alpha": 0.5, "beta1": 0.8, "beta2": 0.95},
        LRS,
        3,
        3,
    ),
    # The paper's betas (0.9, 0.999) and default-like settings, per block kind.
    "blocks-tensor": ({"blocks": "tensor", "weight_decay": 0.05}, [1e-2, 8e-3, 5e-3], 2, 3),
    "blocks-global": ({"blocks": "global", "weight_decay": 0.05}, [1e-2, 8e-3, 5e-3], 2, 3),
    "v-agg-full": ({"v_agg": "full", "alpha": 0.3}, [1e-2, 5e-3], 3, 3),
    # v restarts from 0 every round and is bias-corrected with the local k.
    "v-agg-none": ({"v_agg": "none", "alpha": 0.4, "weight_decay": 0.02}, [1e-2, 5e-3, 2e-3], 3, 3),
    # decoupled false (A3): lambda*y enters g before the moments.
    "coupled-decay-one-step": (
        {"decoupled": False, "alpha": 0.0, "weight_decay": 0.5},
        [1e-2],
        1,
        1,
    ),
    "coupled-decay": ({**MOMENTS, "decoupled": False, "blocks": "global"}, LRS, 3, 3),
}


@pytest.mark.parametrize("case", list(CASES))
def test_fedadamw_by_hand(case: str) -> None:
    fields, lrs, K, clients = CASES[case]
    problem = Problem(clients=clients)
    alg = make("fedadamw", clients=clients, eps=EPS, **fields)
    x, server, _ = run_federated(alg, problem, rounds=len(lrs), local_steps=K, lr=lambda r: lrs[r])
    expected, v_bar = fedadamw_by_hand(problem, lrs, K, **fields)
    assert_close(x, expected)
    if "v_bar" in server:
        v = server["v_bar"]
        assert_close(v if isinstance(v, torch.Tensor) else flatten(v), v_bar)
    assert ("v_bar" in server) == (fields.get("v_agg") != "none")


def test_coupled_decay_first_step_is_sign_like() -> None:
    """k = t = 1: m_hat = g + lambda*x, v_hat = m_hat^2, so the step is lr * m_hat/(|m_hat|+eps);
    the reference agrees with this closed form."""
    problem, lam, lr = Problem(clients=1), 0.5, 1e-2
    x0 = flatten(problem.x0())
    g = problem.flat_grad(x0, 0) + lam * x0
    expected, _ = fedadamw_by_hand(problem, [lr], 1, alpha=0.0, weight_decay=lam, decoupled=False)
    assert_close(expected, x0 - lr * g / (g.abs() + EPS))


@pytest.mark.parametrize(
    ("floor", "extra"),
    [
        (0.1, {"alignment": "convex", "alpha": 0.3, "beta1": 0.0, "v_agg": "none"}),
        (0.01, {"alignment": "convex", "alpha": 0.3}),
    ],
    ids=["convex-beta1-0-no-v-agg", "convex"],
)
def test_dp_fedadamw_convex_alignment_by_hand(floor: float, extra: dict) -> None:
    """dp_fedadamw inherits the switches: alpha scales the debiased step
    alpha*m_hat/(sqrt(max(v_hat - s^2, f*s^2)) + eps), Delta_G gets 1 - alpha."""
    problem, s = Problem(), 0.5
    fields = {**MOMENTS, **extra}
    alg = make("dp_fedadamw", debias_floor=floor, eps=EPS, **fields)
    x, _, _ = run_federated(alg, problem, rounds=3, local_steps=2, lr=lambda r: LRS[r], noise_std=s)

    floors = []

    def floored(v_hat: torch.Tensor) -> torch.Tensor:
        floors.append(float((v_hat - s**2 < floor * s**2).double().mean()))
        return torch.sqrt(torch.clamp(v_hat - s**2, min=floor * s**2)) + EPS

    expected, _ = fedadamw_by_hand(problem, LRS, 2, denominator=floored, **fields)
    assert_close(x, expected)
    assert 0 < sum(floors) / len(floors) < 1  # the floor binds on some coordinates, not all


def test_fedadamw_without_alignment_and_aggregation_is_local_adamw() -> None:
    # FedAdamW Table 7: alpha 0, v_agg none, m_agg false must equal local_adamw exactly, both
    # torch.optim.AdamW recreated every round and the registered local_adamw.
    problem, K, lr, wd = Problem(), 4, 0.02, 0.05
    alg = make("fedadamw", weight_decay=wd, alpha=0.0, v_agg="none", beta1=0.8, beta2=0.95, eps=EPS)
    x, _, _ = run_federated(alg, problem, rounds=2, local_steps=K, lr=lr)
    assert_close(x, local_adamw_reference(problem, 2, K, lr, wd, (0.8, 0.95), EPS))
    assert alg.comm_up() == 8.0
    lrs = [1e-2, 5e-3, 2e-3]
    a, _, _ = run_federated(
        make("fedadamw", alpha=0.0, v_agg="none", weight_decay=0.02, eps=EPS),
        problem,
        rounds=3,
        local_steps=3,
        lr=lambda r: lrs[r],
    )
    b, _, _ = run_federated(
        make("local_adamw", weight_decay=0.02, eps=EPS),
        problem,
        rounds=3,
        local_steps=3,
        lr=lambda r: lrs[r],
    )
    assert_close(a, flatten(b))


def test_convex_alignment_is_not_the_additive_rule() -> None:
    """The two alignments differ from the second round on (Delta_G is zero in the first)."""
    problem = Problem()
    runs = [
        run_federated(
            make("fedadamw", alignment=a, alpha=0.3, eps=EPS),
            problem,
            rounds=2,
            local_steps=2,
            lr=0.02,
        )[0]
        for a in ("additive", "convex")
    ]
    assert not torch.allclose(flatten(runs[0]), flatten(runs[1]))


def test_convex_alignment_communication_and_validation() -> None:
    d = 8
    # alpha 1 with convex alignment has no Delta_G term: nothing extra goes down.
    assert make("fedadamw", alignment="convex", alpha=1.0).comm_down() == d + 2
    assert make("fedadamw", alignment="convex", alpha=0.0).comm_down() == 2 * d + 2
    from fedbench.config import load_run_config

    with pytest.raises(FedbenchError, match="alpha <= 1"):
        load_run_config(None, ["algorithm.alignment=convex", "algorithm.alpha=1.5"])
