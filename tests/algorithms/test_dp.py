"""The dp_ variants: one registration mechanism, DP-FedAdamW's de-biasing, LS, SAM, and the
engine end to end (a dp_ twin without noise reproduces its non-DP algorithm)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from fedbench.algorithms import ALGORITHMS, ParamSpec, RoundInfo, dp
from fedbench.algorithms.dp import DPFedAdamW, laplacian_smooth
from fedbench.algorithms.fedavg import FedAvg, FedAvgConfig
from fedbench.config import parse_run_config
from fedbench.engine import train
from fedbench.registry import Registry

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
        y = _fedadamw_round("dp_fedadamw", std)
        assert all(torch.isfinite(t).all() for t in y)
        y = _fedadamw_round("dp_fedadamw", std, debias_floor=0.1)
        assert all(torch.isfinite(t).all() for t in y)


def test_dp_fedadamw_without_noise_or_debias_is_fedadamw() -> None:
    base = _fedadamw_round("fedadamw", 0.0)
    noiseless = _fedadamw_round("dp_fedadamw", 0.0)
    assert all(torch.equal(a, b) for a, b in zip(noiseless, base, strict=True))
    plain_noisy = _fedadamw_round("fedadamw", 0.3)
    no_debias = _fedadamw_round("dp_fedadamw", 0.3, debias=False)
    assert all(torch.equal(a, b) for a, b in zip(no_debias, plain_noisy, strict=True))


def test_dp_fedadamw_debias_matches_the_formula_on_one_step() -> None:
    cls = ALGORITHMS.get("dp_fedadamw")
    params = cls.Params(lr=0.1, alpha=0.0, weight_decay=0.0, eps=1e-8)
    alg = cls(params, ParamSpec(["w"], [torch.Size([4])], {}), num_clients=1)
    y = [torch.zeros(4, dtype=torch.float64)]
    local = alg.client_begin(y, alg.init_server_state(y), None, RoundInfo(0, 0.1, 1, 1, 1))
    g = torch.tensor([0.5, -0.1, 0.05, 2.0], dtype=torch.float64)
    s = 0.2
    alg.local_step(y, [g.clone()], local, 1, RoundInfo(0, 0.1, 1, 1, 1, grad_noise_std=s))
    # k = t = 1: m_hat = g, v_hat = g^2.
    expected = -0.1 * g / (torch.sqrt(torch.clamp(g**2 - s**2, min=0)) + 1e-8)
    torch.testing.assert_close(y[0], expected)


def test_laplacian_smoothing_inverts_the_circulant_operator() -> None:
    n, sigma = 7, 1.0
    g = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    # A = I + sigma * L with L the periodic 1-D Laplacian (2 on the diagonal, -1 beside it).
    a = torch.eye(n, dtype=torch.float64) * (1 + 2 * sigma)
    for i in range(n):
        a[i, (i + 1) % n] -= sigma
        a[i, (i - 1) % n] -= sigma
    torch.testing.assert_close(laplacian_smooth(g, sigma), torch.linalg.solve(a, g))
    scalar = torch.tensor([3.0])
    assert laplacian_smooth(scalar, sigma) is scalar
    m = torch.randn(2, 3, dtype=torch.float64)
    torch.testing.assert_close(
        laplacian_smooth(m, 0.5), laplacian_smooth(m.flatten(), 0.5).reshape(2, 3)
    )


def test_dp_fedsam_uses_two_gradients_per_step() -> None:
    cls = ALGORITHMS.get("dp_fedsam")
    assert cls.gradients_per_step == 2
    alg = cls(cls.Params(lr=0.1, weight_decay=0.0, rho=0.5), SPEC, num_clients=1)
    y = [torch.ones(s) for s in SPEC.shapes]
    seen: list[list[torch.Tensor]] = []

    def gradient() -> list[torch.Tensor]:
        seen.append([t.clone() for t in y])
        return [t.clone() for t in y]  # gradient of 0.5 ||y||^2

    info = RoundInfo(0, 0.1, 1, 1, 1)
    alg.local_step_with_oracle(y, gradient, {}, 1, info)
    assert len(seen) == 2
    norm = math.sqrt(15)
    e = 0.5 / norm
    torch.testing.assert_close(seen[1][0], torch.full((3, 4), 1 + e))  # g2 taken at y + e
    torch.testing.assert_close(y[0], torch.full((3, 4), 1 - 0.1 * (1 + e)))


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


def test_batchnorm_model_is_refused_with_exit_code_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fedbench.cli import main

    argv = ["fedbench", "train", "--out", str(tmp_path)]
    for item in (
        "model.name=resnet18",
        "model.norm=bn",
        "algorithm.name=dp_fedavg",
        "partition.clients=2",
    ):
        argv += ["--set", item]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "use model.norm gn" in err
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_epsilon_command_prints_the_budget(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fedbench.cli import main

    argv = ["fedbench", "epsilon", "--client-size", "1000"]
    for item in ("algorithm.name=dp_fedavg", "privacy.target_epsilon=2.0", "fl.batch_size=50"):
        argv += ["--set", item]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "calibrated to target_epsilon 2" in out
    eps = float(out.split()[1])
    assert abs(eps - 2.0) / 2.0 < 0.01
