"""The other forms of FedAdamW, computed by hand in float64 (eps 1e-3, so that eps shows):
`alignment: convex` (Appendix A's Algorithm 3, FedAdamW Table 11) and `m_bias_correction: global`
(the authors' public script), alone and together with `v_agg: full` (the public-code form)."""

from __future__ import annotations

import pytest
import torch

from fedbench.algorithms import ALGORITHMS, ParamSpec, RoundInfo
from fedbench.config import load_run_config
from fedbench.errors import FedbenchError
from tests.algorithms.helpers import SHAPES, Problem, assert_close, flatten, make, run_federated

EPS = 1e-3
TOL = 1e-12


def _tensor_means(vec: torch.Tensor) -> torch.Tensor:
    return torch.stack([part.mean() for part in vec.split([s.numel() for s in SHAPES])])


def _expand(means: torch.Tensor) -> torch.Tensor:
    return torch.cat([means[j].expand(s.numel()) for j, s in enumerate(SHAPES)])


def fedadamw_by_hand(
    problem: Problem,
    lrs: list[float],
    K: int,
    *,
    alpha: float,
    wd: float,
    b1: float,
    b2: float,
    convex: bool = False,
    m_global: bool = False,
    v_full: bool = False,
) -> torch.Tensor:
    """FedAdamW on flat vectors: per local step k (t = r*K + k)
        m_hat = m / (1 - b1^(t if m_global else k)),  v_hat = v / (1 - b2^t)
        additive: y <- y - lr*(m_hat/(sqrt(v_hat)+eps) + alpha*Delta_G + wd*y)
        convex:   y <- y - lr*(alpha*m_hat/(sqrt(v_hat)+eps) + (1-alpha)*Delta_G + wd*y)
    v restored from the tensor block means (or the full mean v), m from zero."""
    x = flatten(problem.x0())
    v_bar = torch.zeros(x.numel() if v_full else len(SHAPES), dtype=torch.float64)
    delta_g = torch.zeros_like(x)
    for r, lr in enumerate(lrs):
        deltas, uploads = [], []
        for i in range(problem.N):
            y, m = x.clone(), torch.zeros_like(x)
            v = v_bar.clone() if v_full else _expand(v_bar)
            for k in range(1, K + 1):
                t = r * K + k
                g = problem.flat_grad(y, i)
                m = b1 * m + (1 - b1) * g
                v = b2 * v + (1 - b2) * g**2
                m_hat = m / (1 - b1 ** (t if m_global else k))
                step = m_hat / ((v / (1 - b2**t)).sqrt() + EPS)
                if convex:
                    y = y - lr * (alpha * step + (1 - alpha) * delta_g + wd * y)
                else:
                    y = y - lr * (step + alpha * delta_g + wd * y)
            deltas.append(y - x)
            uploads.append(v if v_full else _tensor_means(v))
        delta_bar = torch.stack(deltas).mean(0)
        x = x + delta_bar
        delta_g = -delta_bar / (K * lr)
        v_bar = torch.stack(uploads).mean(0)
    return x


LRS = [0.02, 0.01, 0.015]


@pytest.mark.parametrize(
    ("fields", "hand"),
    [
        # Table 11's "FedAdamW (Algorithm 3)": beta1 0, no weight decay, convex alignment.
        (
            {"alignment": "convex", "alpha": 0.3, "beta1": 0.0, "weight_decay": 0.0},
            {"convex": True, "alpha": 0.3, "b1": 0.0, "wd": 0.0},
        ),
        # Convex with momentum and decay: the decay is not scaled by alpha.
        (
            {"alignment": "convex", "alpha": 0.3, "beta1": 0.8, "weight_decay": 0.05},
            {"convex": True, "alpha": 0.3, "b1": 0.8, "wd": 0.05},
        ),
        (
            {"m_bias_correction": "global", "alpha": 0.5, "beta1": 0.8, "weight_decay": 0.05},
            {"m_global": True, "alpha": 0.5, "b1": 0.8, "wd": 0.05},
        ),
        # The public-code form: full v restored coordinate by coordinate, m corrected with t.
        (
            {"m_bias_correction": "global", "v_agg": "full", "alpha": 0.5, "beta1": 0.8},
            {"m_global": True, "v_full": True, "alpha": 0.5, "b1": 0.8, "wd": 0.01},
        ),
    ],
    ids=["algorithm3", "convex-decay", "m-global", "public-code"],
)
def test_fedadamw_forms_three_rounds_by_hand(fields: dict, hand: dict) -> None:
    problem, K = Problem(), 3
    alg = make("fedadamw", beta2=0.95, eps=EPS, **fields)
    x, _, _ = run_federated(alg, problem, rounds=3, local_steps=K, lr=lambda r: LRS[r])
    expected = fedadamw_by_hand(problem, LRS, K, b2=0.95, **hand)
    assert_close(x, expected, tol=TOL)


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


def test_convex_alignment_communication_and_validation() -> None:
    d = 8
    # alpha 1 with convex alignment has no Delta_G term: nothing extra goes down.
    assert make("fedadamw", alignment="convex", alpha=1.0).comm_down() == d + 2
    assert make("fedadamw", alignment="convex", alpha=0.0).comm_down() == 2 * d + 2
    with pytest.raises(FedbenchError, match="alpha <= 1"):
        load_run_config(None, ["algorithm.alignment=convex", "algorithm.alpha=1.5"])


def test_dp_fedadamw_convex_alignment_scales_the_debiased_step_by_alpha() -> None:
    """dp_fedadamw inherits the switches: round 2 of one client with Delta_G from round 1,
    y <- y - lr*(alpha*m_hat/(sqrt(max(v_hat - s^2, f*s^2)) + eps) + (1-alpha)*Delta_G + wd*y)."""
    cls = ALGORITHMS.get("dp_fedadamw")
    alpha, wd, lr, s, floor = 0.3, 0.05, 0.1, 0.2, 0.1
    params = cls.Params(
        lr=lr, alpha=alpha, weight_decay=wd, eps=EPS, alignment="convex", debias_floor=floor,
        v_agg="none", beta1=0.0,
    )  # fmt: skip
    alg = cls(params, ParamSpec(["w"], [torch.Size([4])], {}), num_clients=1)
    x = [torch.tensor([0.3, -0.2, 0.1, 1.0], dtype=torch.float64)]
    delta = [torch.tensor([0.02, -0.01, 0.0, 0.04], dtype=torch.float64)]
    server = alg.init_server_state(x)
    alg.server_update([t.clone() for t in x], {"delta": delta}, server, RoundInfo(0, lr, 2, 1, 1))
    info = RoundInfo(1, lr, 2, 1, 1, grad_noise_std=s)
    local = alg.client_begin(x, server, None, info)
    y = [x[0].clone()]
    g = torch.tensor([0.5, -0.1, 0.05, 2.0], dtype=torch.float64)
    alg.local_step(y, [g.clone()], local, 1, info)
    # v from zero (v_agg none): k = 1 corrections; beta1 0: m_hat = g; v_hat = g^2.
    denom = torch.sqrt(torch.clamp(g**2 - s**2, min=floor * s**2)) + EPS
    delta_g = -delta[0] / (2 * lr)
    expected = x[0] - lr * (alpha * g / denom + (1 - alpha) * delta_g + wd * x[0])
    torch.testing.assert_close(y[0], expected, atol=TOL, rtol=0)
