"""Client-level DP (privacy.level client): clipping of the whole upload, the server's noisy mean,
Andrew et al.'s adaptive clip, epsilon against Opacus' RDP analysis called directly, and the
engine end to end (no noise + no clipping = FedAvg; resume keeps the adaptive clip)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from fedbench.config import PrivacyConfig
from fedbench.engine import train
from fedbench.privacy.client_level import (
    ClientLevelRound,
    client_level_plan,
    clip_upload,
    next_clip,
    noisy_mean,
    server_generator,
)
from tests.conftest import read_metrics, strip_elapsed
from tests.engine.test_engine import tiny_config


def _f64(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def test_clip_upload_scales_all_keys_by_their_joint_norm() -> None:
    upload = {"delta": [_f64(3.0, 0.0)], "extra": [_f64(0.0, 4.0)]}  # joint norm 5
    clipped, under = clip_upload(upload, 2.5)
    assert not under
    torch.testing.assert_close(clipped["delta"][0], _f64(1.5, 0.0), rtol=1e-15, atol=0)
    torch.testing.assert_close(clipped["extra"][0], _f64(0.0, 2.0), rtol=1e-15, atol=0)
    same, under = clip_upload(upload, 5.0)
    assert under and torch.equal(same["delta"][0], upload["delta"][0])


def test_noisy_mean_adds_one_seeded_draw_per_key_in_sorted_order() -> None:
    sums = {"delta": [_f64(2.0, 4.0)], "a": [_f64(6.0)]}
    gen = server_generator(3, 7)
    got = noisy_mean(sums, 2, clip=0.5, noise_multiplier=2.0, generator=gen)
    ref = server_generator(3, 7)
    noise_a = torch.randn(1, generator=ref, dtype=torch.float64)  # "a" sorts first
    noise_delta = torch.randn(2, generator=ref, dtype=torch.float64)
    torch.testing.assert_close(got["a"][0], (6.0 + 1.0 * noise_a) / 2, rtol=1e-15, atol=0)
    torch.testing.assert_close(
        got["delta"][0], (_f64(2.0, 4.0) + noise_delta) / 2, rtol=1e-15, atol=0
    )
    quiet = noisy_mean(sums, 2, clip=0.5, noise_multiplier=0.0, generator=server_generator(0, 0))
    torch.testing.assert_close(quiet["delta"][0], _f64(1.0, 2.0), rtol=0, atol=0)


def test_adaptive_clip_is_andrew_et_al_geometric_update() -> None:
    gen = server_generator(0, 1)
    clip = next_clip(2.0, 3, 4, quantile=0.5, lr=0.2, count_noise=1.5, generator=gen)
    z = float(torch.randn((), generator=server_generator(0, 1), dtype=torch.float64))
    assert clip == pytest.approx(2.0 * math.exp(-0.2 * ((3 + 1.5 * z) / 4 - 0.5)), rel=1e-14)


def test_update_noise_share_and_impossible_split() -> None:
    plan = client_level_plan(
        PrivacyConfig(level="client", adaptive_clip=True, noise_multiplier=1.0, count_noise=2.0),
        num_clients=100,
        sampled=10,
        rounds=5,
    )
    assert plan.update_noise_multiplier == pytest.approx((1.0 - 1 / 16) ** -0.5, rel=1e-14)
    from fedbench.errors import FedbenchError

    with pytest.raises(FedbenchError, match=r"count_noise 0\.5 is too small"):
        client_level_plan(
            PrivacyConfig(level="client", adaptive_clip=True, noise_multiplier=1.0),
            num_clients=100,
            sampled=10,
            rounds=5,
        )


def test_epsilon_equals_opacus_rdp_analysis_called_directly() -> None:
    from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent
    from opacus.accountants.rdp import RDPAccountant

    config = PrivacyConfig(level="client", noise_multiplier=1.1, delta=1e-5)
    plan = client_level_plan(config, num_clients=1000, sampled=50, rounds=200)
    orders = RDPAccountant.DEFAULT_ALPHAS
    rdp = compute_rdp(q=50 / 1000, noise_multiplier=1.1, steps=200, orders=orders)
    expected, _ = get_privacy_spent(orders=orders, rdp=rdp, delta=1e-5)
    assert plan.epsilon() == pytest.approx(float(expected), rel=1e-12)
    assert plan.epsilon(100) < plan.epsilon()
    calibrated = client_level_plan(
        PrivacyConfig(level="client", target_epsilon=2.0), num_clients=1000, sampled=50, rounds=200
    )
    assert 1.96 <= calibrated.epsilon() <= 2.0


def test_engine_without_noise_or_clipping_is_fedavg(tmp_path: Path) -> None:
    plain = train(tiny_config("algorithm.name=fedavg"), tmp_path / "plain")
    private = train(
        tiny_config(
            "algorithm.name=fedavg",
            "privacy.level=client",
            "privacy.noise_multiplier=0",
            "privacy.clip=1e9",
        ),
        tmp_path / "private",
    )
    rows = [
        {k: v for k, v in row.items() if k != "epsilon"} for row in read_metrics(private.run_dir)
    ]
    assert strip_elapsed(rows) == strip_elapsed(read_metrics(plain.run_dir))


def test_engine_clips_and_reports_epsilon(tmp_path: Path) -> None:
    cfg = tiny_config(
        "algorithm.name=fedavg", "privacy.level=client", "privacy.noise_multiplier=0.8"
    )
    result = train(cfg, tmp_path)
    summary = result.summary
    plan = client_level_plan(cfg.privacy, num_clients=6, sampled=3, rounds=4)
    assert summary["epsilon"] == pytest.approx(plan.epsilon(), rel=1e-12)
    assert read_metrics(result.run_dir)[-1]["epsilon"] == summary["epsilon"]


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["algorithm.name=dp_fedavg"], "use fedavg (not dp_fedavg) with privacy.level client"),
        (["algorithm.name=fedexp"], "reads every client's upload"),
        (["algorithm.weighting=samples"], "needs algorithm.weighting uniform"),
        (
            ["privacy.level=sample", "privacy.adaptive_clip=true"],
            "adaptive_clip applies to level client only",
        ),
    ],
)
def test_client_level_config_errors(run_cli, sets: list[str], message: str) -> None:
    args = ["train", "--set", "model.name=logreg", "--set", "privacy.level=client"]
    for item in sets:
        args += ["--set", item]
    code, _, err = run_cli(*args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_epsilon_command_describes_a_client_level_config(run_cli) -> None:
    code, out, _ = run_cli(
        "epsilon",
        "--set", "privacy.level=client",
        "--set", "privacy.noise_multiplier=1.1",
        "--set", "partition.clients=1000",
        "--set", "fl.participation=0.05",
        "--set", "fl.rounds=200",
        "--client-size", "50",
    )  # fmt: skip
    plan = client_level_plan(
        PrivacyConfig(level="client", noise_multiplier=1.1),
        num_clients=1000,
        sampled=50,
        rounds=200,
    )
    assert code == 0 and f"epsilon {plan.epsilon():.4f} at delta 1e-05 (client level" in out
    assert "q = S/N = 50/1000 = 0.05" in out


def test_engine_fednova_with_equal_steps_is_dp_fedavg(tmp_path: Path) -> None:
    """DP-FedNova with every client at K steps is DP-FedAvg (same clip, same noise draw), the
    metrics identical to the digit. Before the fix: 15% against 82% test accuracy on digits."""
    private = ["privacy.level=client", "privacy.noise_multiplier=0.5", "privacy.clip=1"]
    rows = {}
    for name in ("fedavg", "fednova"):
        result = train(tiny_config(f"algorithm.name={name}", *private), tmp_path / name)
        rows[name] = strip_elapsed(read_metrics(result.run_dir))
    assert rows["fednova"] == rows["fedavg"]


def test_impossible_split_message_states_the_checked_bound() -> None:
    """sigma_u^-2 = z^-2 - (2 sigma_b)^-2 > 0 needs sigma_b > z / 2 (Andrew et al., Thm. 1): at
    z = 3 the bound is 1.5 (the message used to say 1 / (2 z) = 0.167)."""
    from fedbench.errors import FedbenchError

    config = PrivacyConfig(
        level="client", adaptive_clip=True, noise_multiplier=3.0, count_noise=1.4
    )
    with pytest.raises(FedbenchError, match=r"count_noise > noise_multiplier / 2 = 1\.5;"):
        client_level_plan(config, num_clients=100, sampled=10, rounds=5)
    ok = client_level_plan(
        config.model_copy(update={"count_noise": 1.6}), num_clients=100, sampled=10, rounds=5
    )
    assert ok.update_noise_multiplier == pytest.approx((3.0**-2 - 3.2**-2) ** -0.5, rel=1e-14)


def test_poisson_client_sampling_draws_each_client_at_rate_q() -> None:
    from fedbench.engine.schedule import client_schedule, poisson_clients

    rounds = [poisson_clients(3, r, 40, 10) for r in range(2000)]
    joined = np.array([[c in clients for c in range(40)] for clients in rounds])
    assert abs(joined.mean() - 0.25) < 0.005  # q = S/N = 10/40, 80,000 draws: 5 sigma ~ 0.008
    assert len({len(clients) for clients in rounds}) > 5  # the round size varies
    assert poisson_clients(3, 7, 40, 10) == rounds[7]  # seeded by (seed, round)
    schedule = client_schedule(3, 5, 40, 10, poisson=True)
    assert list(schedule[2:4]) == rounds[2:4]


def test_poisson_rounds_divide_by_the_expected_count() -> None:
    """Under Poisson sampling the realised count depends on who joined, so the sums are divided
    by the expected S (McMahan et al.'s fixed denominator), in the update and the clip count."""
    config = PrivacyConfig(level="client", noise_multiplier=0.0, clip=10.0, sampling="poisson")
    plan = client_level_plan(config, num_clients=20, sampled=4, rounds=1)
    mechanism = ClientLevelRound(plan, seed=0, round_idx=0, clip=10.0)
    uploads = [{"delta": [_f64(1.0, 2.0)]}, {"delta": [_f64(3.0, -1.0)]}]
    sums = {"delta": [sum(mechanism.add(u)["delta"][0] for u in uploads)]}
    torch.testing.assert_close(mechanism.privatise(sums)["delta"][0], _f64(1.0, 0.25))
    fixed = client_level_plan(config.model_copy(update={"sampling": "fixed"}), 20, 4, 1)
    assert (plan.denominator(2), fixed.denominator(2)) == (4, 2)


@pytest.mark.parametrize(
    ("sets", "accounting"),
    [
        (["algorithm.name=fedavg", "privacy.level=client"], "approximate"),
        (["algorithm.name=fedavg", "privacy.level=client", "privacy.sampling=poisson"], "exact"),
        (
            [
                "algorithm.name=fedavg",
                "privacy.level=client",
                "privacy.sampling=poisson",
                "fl.dropout=0.2",
            ],
            "upper bound",
        ),
        (["algorithm.name=dp_fedavg"], "approximate"),
        (["algorithm.name=dp_fedavg", "privacy.sampling=poisson"], "exact"),
        (
            ["algorithm.name=dp_fedavg", "privacy.sampling=poisson", "fl.local_steps_min=1"],
            "upper bound",
        ),
    ],
)
def test_summary_and_epsilon_say_what_was_accounted(
    tmp_path: Path, run_cli, sets: list[str], accounting: str
) -> None:
    import json

    result = train(tiny_config("privacy.noise_multiplier=0.8", *sets), tmp_path)
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["privacy_accounting"]["accounting"] == accounting
    assert "Poisson-subsampled Gaussian" in summary["privacy_accounting"]["model"]
    args = ["epsilon", "--client-size", "50"]
    for item in ("privacy.noise_multiplier=0.8", *sets):
        args += ["--set", item]
    code, out, _ = run_cli(*args)
    direction = summary["privacy_accounting"]["direction"]
    assert code == 0 and f"accounting: {accounting}, {direction} (" in out


def test_client_level_poisson_run_trains_with_varying_rounds(tmp_path: Path) -> None:
    cfg = tiny_config(
        "algorithm.name=fedavg",
        "privacy.level=client",
        "privacy.sampling=poisson",
        "privacy.noise_multiplier=0.5",
    )
    result = train(cfg, tmp_path)
    summary = result.summary
    from fedbench.engine.schedule import poisson_clients

    expected = [0] * 6
    for r in range(4):
        for c in poisson_clients(cfg.seed, r, 6, 3):
            expected[c] += 1
    assert result.status == "completed" and summary["participation_counts"] == expected
    assert "client-poisson-sampling" in cfg._results_data()["revised"]


def test_second_moment_uploads_are_clamped_at_zero_after_the_noise() -> None:
    """A declared non-negative key (`Algorithm.nonnegative_uploads`: a second moment) has its
    noisy mean clamped at 0; the other keys keep the same draw of noise, unclamped."""
    config = PrivacyConfig(level="client", noise_multiplier=1.0, clip=1.0)
    plan = client_level_plan(config, num_clients=10, sampled=2, rounds=1)
    uploads = [{"delta": [_f64(0.1, -0.2, 0.3)], "v": [_f64(0.01, 0.02, 0.0)]}] * 2
    means = []
    for nonnegative in (frozenset(), frozenset({"v"})):
        mechanism = ClientLevelRound(plan, seed=5, round_idx=0, clip=1.0, nonnegative=nonnegative)
        added = [mechanism.add(u) for u in uploads]
        sums = {k: [added[0][k][0] + added[1][k][0]] for k in ("delta", "v")}
        means.append(mechanism.privatise(sums))
    raw, clamped = means
    assert (raw["v"][0] < 0).any() and (raw["v"][0] > 0).any()  # the noise crossed 0 somewhere
    torch.testing.assert_close(clamped["v"][0], raw["v"][0].clamp_min(0.0), rtol=0, atol=0)
    torch.testing.assert_close(clamped["delta"][0], raw["delta"][0], rtol=0, atol=0)


@pytest.mark.parametrize(
    ("algorithm", "keys"),
    [("fedadamw", {"v_blocks"}), ("fedlada", {"v_hat"}), ("fafed", {"v"})],
)
def test_adaptive_rules_declare_their_uploaded_second_moments(
    algorithm: str, keys: set[str], tmp_path: Path
) -> None:
    """Their uploaded second moments are declared, and with client-level noise whose mean of v
    dips below 0 the run still trains (before the clamp: sqrt of a negative v, a NaN update
    and a run stopped as diverged in round 2)."""
    from fedbench.algorithms import ALGORITHMS

    assert keys <= ALGORITHMS.get(algorithm).nonnegative_uploads
    cfg = tiny_config(
        f"algorithm.name={algorithm}",
        "privacy.level=client",
        "privacy.noise_multiplier=0.5",
        "privacy.clip=1.0",
    )
    result = train(cfg, tmp_path)
    assert result.status == "completed", result.summary["error"]
    assert all(math.isfinite(row["train_loss"]) for row in read_metrics(result.run_dir))
