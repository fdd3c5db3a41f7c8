"""The dp_ variants: one registration mechanism, DP-FedAdamW's de-biasing, LS, SAM, and the
engine end to end (a dp_ twin without noise reproduces its non-DP algorithm)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from fedbench.algorithms import ALGORITHMS, ParamSpec, RoundInfo, dp
from fedbench.algorithms.base import StepOracle
from fedbench.algorithms.dp import DPFedAdamW, laplacian_smooth
from fedbench.algorithms.fedavg import FedAvg, FedAvgConfig
from fedbench.config import parse_run_config
from fedbench.engine import train
from fedbench.registry import Registry
from tests.algorithms.harness import EPS, Problem, assert_close, make, run_federated
from tests.algorithms.test_fedadamw import fedadamw_by_hand

#: The measured default of dp_fedadamw's debias_floor (docs/privacy.md).
DEFAULT_FLOOR = 0.03
SPEC = ParamSpec(names=["w", "b"], shapes=[torch.Size([3, 4]), torch.Size([3])], heads={})


def test_every_base_that_supports_privacy_has_a_dp_twin() -> None:
    bases = [(n, c) for n, c in ALGORITHMS.items() if not c.requires_privacy]
    assert len(bases) >= 13
    for name, cls in bases:
        assert (f"dp_{name}" in ALGORITHMS) == cls.supports_privacy, name
    assert "dp_fedexp" not in ALGORITHMS  # FedExP opts out (supports_privacy = False)
    for name in ("dp_fedavg", "dp_local_adamw", "dp_fedadamw", "dp_fedavg_ls", "dp_fedsam"):
        cls = ALGORITHMS.get(name)
        assert cls.requires_privacy
        assert cls.Params().name == name
    # The variants with a rule of their own are not replaced by plain twins.
    assert ALGORITHMS.get("dp_fedadamw") is DPFedAdamW


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> Registry:
    """A copy of the algorithm registry that a test may extend without leaking names."""
    copy: Registry = Registry("algorithm")
    for name, cls in ALGORITHMS.items():
        copy.register(name)(cls)
    monkeypatch.setattr(dp, "ALGORITHMS", copy)
    return copy


def test_a_new_base_gets_its_plain_dp_twin(registry: Registry) -> None:
    class Fake(FedAvg):
        Params = FedAvgConfig

    class NoDP(FedAvg):
        Params = FedAvgConfig
        supports_privacy = False

    registry.register("fake_base")(Fake)
    registry.register("no_dp_base")(NoDP)
    assert dp.register_plain_dp_variants() == ["dp_fake_base"]
    cls = registry.get("dp_fake_base")
    assert issubclass(cls, Fake) and cls.requires_privacy
    params = cls.Params.model_validate({"name": "dp_fake_base", "lr": 0.3})
    assert params.lr == 0.3
    assert dp.register_plain_dp_variants() == []  # idempotent


def test_register_dp_refuses_unknown_bases_and_bases_without_privacy(registry: Registry) -> None:
    class NoDP(FedAvg):
        Params = FedAvgConfig
        supports_privacy = False

    registry.register("no_dp_base")(NoDP)
    with pytest.raises(ValueError, match="no algorithm 'no_such_base'"):
        dp.register_dp("no_such_base")
    with pytest.raises(ValueError, match="supports_privacy"):
        dp.register_dp("no_dp_base")
    with pytest.raises(ValueError, match="supports_privacy"):
        dp.register_dp("dp_fedavg")  # a dp_ variant is not a base
    with pytest.raises(ValueError, match="registered twice"):
        dp.register_dp("fedavg")  # dp_fedavg exists


def test_dp_variant_requires_privacy_and_keeps_base_fields() -> None:
    cfg = parse_run_config({"algorithm": {"name": "dp_fedadamw", "alpha": 0.2, "debias": False}})
    assert cfg.algorithm.alpha == 0.2 and cfg.algorithm.debias is False
    with pytest.raises(Exception, match="unknown config field"):
        parse_run_config({"algorithm": {"name": "dp_fedavg", "debias": True}})


def _fedadamw_round(name: str, noise_std: float, **fields) -> list[torch.Tensor]:
    cls = ALGORITHMS.get(name)
    params = cls.Params.model_validate({"name": name, "lr": 1e-3, **fields})
    alg = cls(params, SPEC, num_clients=2)
    gen = torch.Generator().manual_seed(0)
    y = [torch.randn(s, generator=gen, dtype=torch.float64) for s in SPEC.shapes]
    server = alg.init_server_state(y)
    info = RoundInfo(0, 1e-3, 5, 2, 1, grad_noise_std=noise_std)
    local = alg.client_begin(y, server, None, info)
    for k in range(1, 6):
        # Tiny signal buried in noise of std noise_std: v_hat is often below noise_std^2.
        g = [
            1e-4 + noise_std * torch.randn(s, generator=gen, dtype=torch.float64)
            for s in SPEC.shapes
        ]
        alg.local_step(y, g, local, k, info)
    return y


def test_dp_fedadamw_debias_never_yields_nan() -> None:
    for std in (1e-1, 1e-3, 1e-6, 10.0):
        for floor in (0.0, DEFAULT_FLOOR):  # the paper's literal form and the default
            y = _fedadamw_round("dp_fedadamw", std, debias_floor=floor)
            assert all(torch.isfinite(t).all() for t in y)


def test_dp_fedadamw_without_noise_or_debias_is_fedadamw() -> None:
    base = _fedadamw_round("fedadamw", 0.0)
    noiseless = _fedadamw_round("dp_fedadamw", 0.0)
    assert all(torch.equal(a, b) for a, b in zip(noiseless, base, strict=True))
    plain_noisy = _fedadamw_round("fedadamw", 0.3)
    no_debias = _fedadamw_round("dp_fedadamw", 0.3, debias=False)
    assert all(torch.equal(a, b) for a, b in zip(no_debias, plain_noisy, strict=True))


@pytest.mark.parametrize("floor", [0.0, 0.1, 1.0])
def test_dp_fedadamw_floored_denominator_by_hand(floor: float) -> None:
    """One step (k = t = 1: m_hat = g, v_hat = g^2) with Phi = s^2 = 0.04: coordinates 0 and 3
    have v_hat above Phi (denominator sqrt(v_hat - Phi) + eps unless f*Phi is larger), 1 and 2
    below it (denominator sqrt(f*Phi) + eps; eps alone at f = 0)."""
    cls = ALGORITHMS.get("dp_fedadamw")
    lr, eps, s = 0.1, 1e-3, 0.2
    params = cls.Params(lr=lr, alpha=0.0, weight_decay=0.0, eps=eps, debias_floor=floor)
    alg = cls(params, ParamSpec(["w"], [torch.Size([4])], {}), num_clients=1)
    y = [torch.zeros(4, dtype=torch.float64)]
    info = RoundInfo(0, lr, 1, 1, 1, grad_noise_std=s)
    local = alg.client_begin(y, alg.init_server_state(y), None, info)
    g = [0.5, -0.1, 0.05, 2.0]
    alg.local_step(y, [torch.tensor(g, dtype=torch.float64)], local, 1, info)
    phi = s * s
    expected = [-lr * gi / (math.sqrt(max(gi * gi - phi, floor * phi)) + eps) for gi in g]
    torch.testing.assert_close(
        y[0], torch.tensor(expected, dtype=torch.float64), atol=1e-12, rtol=1e-12
    )
    if floor == 0.0:  # the paper's literal form: noise-dominated coordinates step by lr*g/eps
        assert y[0][1].item() == pytest.approx(lr * 0.1 / eps, rel=1e-12)


@pytest.mark.parametrize(
    ("floor", "v_bias_correction"), [(0.0, "global"), (0.1, "global"), (0.01, "local")]
)
def test_dp_fedadamw_three_rounds_by_hand(floor: float, v_bias_correction: str) -> None:
    """FedAdamW's rounds with the denominator sqrt(max(v_hat - Phi, f*Phi)) + eps (exact
    gradients; the rule only needs to know the noise std sigma*C/B)."""
    problem, K, wd, alpha, b1, b2, s = Problem(), 3, 0.05, 0.5, 0.8, 0.95, 0.3
    lrs = [0.02, 0.01, 0.015]
    fields = {"weight_decay": wd, "alpha": alpha, "beta1": b1, "beta2": b2, "eps": EPS}
    alg = make("dp_fedadamw", debias_floor=floor, v_bias_correction=v_bias_correction, **fields)
    x, server, _ = run_federated(
        alg, problem, rounds=3, local_steps=K, lr=lambda r: lrs[r], noise_std=s
    )
    phi = s * s

    def floored(v_hat: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(torch.maximum(v_hat - phi, torch.full_like(v_hat, floor * phi))) + EPS

    ref, v_bar = fedadamw_by_hand(
        problem,
        lrs,
        K,
        weight_decay=wd,
        alpha=alpha,
        beta1=b1,
        beta2=b2,
        v_bias_correction=v_bias_correction,
        denominator=floored,
    )
    assert_close(x, ref)
    assert_close(server["v_bar"], v_bar)


def test_dp_fedadamw_without_noise_is_fedadamw_by_hand() -> None:
    """sigma = 0 (or debias false): FedAdamW's denominator sqrt(v_hat) + eps."""
    problem, K, lrs = Problem(), 2, [0.02, 0.01]
    fields = {"weight_decay": 0.05, "alpha": 0.5, "beta1": 0.8, "beta2": 0.95}
    ref, _ = fedadamw_by_hand(problem, lrs, K, **fields)
    for noise_std, debias in ((0.0, True), (0.3, False)):
        alg = make("dp_fedadamw", debias=debias, eps=EPS, **fields)
        x, _, _ = run_federated(
            alg, problem, rounds=2, local_steps=K, lr=lambda r: lrs[r], noise_std=noise_std
        )
        assert_close(x, ref)


def test_dp_fedadamw_default_floor_is_the_measured_one() -> None:
    """docs/privacy.md, "Choosing debias_floor": the smallest f of {0, 0.01, 0.03, 0.1, 0.3, 1}
    that never blew up (3 seeds, two presets)."""
    assert ALGORITHMS.get("dp_fedadamw").Params().debias_floor == DEFAULT_FLOOR


def _smoothing_matrix(n: int, sigma: float) -> torch.Tensor:
    """A = I + sigma * L with L the periodic 1-D Laplacian (2 on the diagonal, -1 beside it)."""
    a = torch.eye(n, dtype=torch.float64) * (1 + 2 * sigma)
    for i in range(n):
        a[i, (i + 1) % n] -= sigma
        a[i, (i - 1) % n] -= sigma
    return a


@pytest.mark.parametrize(("n", "sigma"), [(7, 1.0), (7, 0.35), (8, 2.0), (2, 1.0)])
def test_laplacian_smoothing_inverts_the_circulant_operator(n: int, sigma: float) -> None:
    g = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    got = laplacian_smooth(g, sigma)
    assert got.dtype == torch.float64
    torch.testing.assert_close(
        got, torch.linalg.solve(_smoothing_matrix(n, sigma), g), atol=1e-12, rtol=1e-12
    )


def test_laplacian_smoothing_leaves_scalars_and_sigma_zero_alone_and_keeps_shapes() -> None:
    scalar = torch.tensor([3.0])
    assert laplacian_smooth(scalar, 1.0) is scalar
    g = torch.randn(5, dtype=torch.float64)
    assert laplacian_smooth(g, 0.0) is g
    m = torch.randn(2, 3, dtype=torch.float64)
    torch.testing.assert_close(
        laplacian_smooth(m, 0.5), laplacian_smooth(m.flatten(), 0.5).reshape(2, 3)
    )


def test_dp_fedavg_ls_local_step_by_hand() -> None:
    """y <- y - lr * (LS(g) + lambda*y), LS = solve((1 + 2 sigma) I - sigma (shift + shift^T))
    per tensor; a one-element tensor is left as it is."""
    cls = ALGORITHMS.get("dp_fedavg_ls")
    lr, wd, sigma = 0.1, 0.05, 0.7
    spec = ParamSpec(["w", "b"], [torch.Size([7]), torch.Size([1])], {})
    alg = cls(cls.Params(lr=lr, weight_decay=wd, sigma_ls=sigma), spec, num_clients=1)
    gen = torch.Generator().manual_seed(1)
    y = [
        torch.randn(7, generator=gen, dtype=torch.float64),
        torch.tensor([0.3], dtype=torch.float64),
    ]
    g = [
        torch.randn(7, generator=gen, dtype=torch.float64),
        torch.tensor([-2.0], dtype=torch.float64),
    ]
    a = _smoothing_matrix(7, sigma)
    expected = [
        y[0] - lr * (torch.linalg.solve(a, g[0]) + wd * y[0]),
        y[1] - lr * (g[1] + wd * y[1]),
    ]
    alg.local_step(y, [t.clone() for t in g], {}, 1, RoundInfo(0, lr, 1, 1, 1))
    for got, want in zip(y, expected, strict=True):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-12)


def test_dp_fedsam_uses_two_gradients_per_step() -> None:
    """e = rho * g1/||g1|| with g1 at y; g2 at y + e; y <- y - lr * (g2 + lambda*y)."""
    cls = ALGORITHMS.get("dp_fedsam")
    assert cls.gradients_per_step == 2
    lr, wd, rho = 0.1, 0.2, 0.5
    alg = cls(cls.Params(lr=lr, weight_decay=wd, rho=rho), SPEC, num_clients=1)
    y = [torch.ones(s, dtype=torch.float64) for s in SPEC.shapes]
    seen: list[list[torch.Tensor]] = []

    def gradient() -> list[torch.Tensor]:
        seen.append([t.clone() for t in y])
        return [2.0 * t.clone() for t in y]  # gradient of ||y||^2

    alg.local_step_with_oracle(y, StepOracle(gradient), {}, 1, RoundInfo(0, lr, 1, 1, 1))
    assert len(seen) == 2
    e = rho * 2.0 / math.sqrt(4.0 * 15)  # g1 = 2 on 15 coordinates
    torch.testing.assert_close(seen[1][0], torch.full((3, 4), 1 + e, dtype=torch.float64))
    expected = 1 - lr * (2 * (1 + e) + wd * 1.0)
    torch.testing.assert_close(
        y[0], torch.full((3, 4), expected, dtype=torch.float64), atol=1e-12, rtol=1e-12
    )


# --- end to end through the engine -------------------------------------------------------------

BASE = {
    "seed": 3,
    "data": {"name": "digits"},
    "partition": {"kind": "dirichlet", "alpha": 0.6, "clients": 4},
    "model": {"name": "logreg"},
    "fl": {"rounds": 2, "participation": 0.5, "local_steps": 3, "batch_size": 16},
    "eval": {"every": 1, "train_subset": 200},
    "runtime": {"device": "cpu", "checkpoint_every": 0},
}


def _metrics(out: Path, cfg_dict: dict) -> list[dict]:
    result = train(parse_run_config(cfg_dict), out)
    assert result.status == "completed", result.summary
    rows = [
        json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    return rows


@pytest.mark.engine
@pytest.mark.parametrize(
    ("name", "lr"), [("fedavg", 0.1), ("local_adamw", 1e-3), ("fedadamw", 1e-3)]
)
def test_noiseless_unclipped_dp_twin_reproduces_the_algorithm(
    tmp_path: Path, name: str, lr: float
) -> None:
    algorithm = {"lr": lr, "grad_clip": None}
    plain = _metrics(tmp_path / "a", {**BASE, "algorithm": {"name": name, **algorithm}})
    dp = _metrics(
        tmp_path / "b",
        {
            **BASE,
            "algorithm": {"name": f"dp_{name}", **algorithm},
            "privacy": {"noise_multiplier": 0.0, "clip": 1.0e6},
        },
    )
    assert len(plain) == len(dp) == 3
    for a, b in zip(plain, dp, strict=True):
        assert b["test_acc"] == pytest.approx(a["test_acc"], abs=1e-9)
        for key in ("test_loss", "train_loss"):
            assert b[key] == pytest.approx(a[key], rel=1e-5)
        assert "epsilon" in b and "epsilon" not in a


@pytest.mark.engine
def test_dp_run_writes_epsilon_to_metrics_and_summary(tmp_path: Path) -> None:
    cfg = {
        **BASE,
        "algorithm": {"name": "dp_fedavg_ls"},
        "privacy": {"noise_multiplier": 1.0, "clip": 0.5, "delta": 1e-5},
    }
    rows = _metrics(tmp_path, cfg)
    summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
    eps = [row["epsilon"] for row in rows]
    assert eps[0] == 0.0 and eps[1] > 0 and eps[2] >= eps[1]
    assert summary["epsilon"] == pytest.approx(eps[-1])
    assert summary["delta"] == 1e-5
    assert all(math.isfinite(row["train_loss"]) for row in rows)


@pytest.mark.engine
def test_batchnorm_model_is_refused_with_exit_code_2(tmp_path: Path, run_cli) -> None:
    args = ["train", "--out", str(tmp_path)]
    for item in (
        "model.name=resnet18",
        "model.norm=bn",
        "algorithm.name=dp_fedavg",
        "partition.clients=2",
    ):
        args += ["--set", item]
    code, _, err = run_cli(*args)
    assert code == 2
    err = err.strip()
    assert err.count("\n") == 0 and "use model.norm gn" in err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.engine
def test_epsilon_command_prints_the_budget(run_cli) -> None:
    args = ["epsilon", "--client-size", "1000"]
    for item in ("algorithm.name=dp_fedavg", "privacy.target_epsilon=2.0", "fl.batch_size=50"):
        args += ["--set", item]
    code, out, _ = run_cli(*args)
    assert code == 0
    assert "calibrated to target_epsilon 2" in out
    eps = float(out.split()[1])
    assert abs(eps - 2.0) / 2.0 < 0.01
