"""Accounting against Opacus' accountants, and target_epsilon calibration."""

from __future__ import annotations

import pytest
from opacus.accountants import RDPAccountant

from fedbench.config import parse_run_config
from fedbench.privacy.accounting import (
    Account,
    account,
    calibrate_noise,
    client_epsilons,
    sampling_rate,
    worst_epsilon,
)
from fedbench.privacy.plan import make_plan

SCHEDULE = [[0, 1], [1, 2], [0, 2], [0, 1]]
SIZES = [100, 200, 50]
BATCH, K, DELTA = 10, 5, 1e-5


def opacus_epsilon(sigma: float, rate: float, steps: int) -> float:
    acc = RDPAccountant()
    for _ in range(steps):
        acc.step(noise_multiplier=sigma, sample_rate=rate)
    return acc.get_epsilon(delta=DELTA)


def accounts_of(schedule: list[list[int]], per_step: int = 1) -> list[Account]:
    """One release of `per_step` gradients per local step, K steps per round joined."""
    joins = [sum(c in clients for clients in schedule) for c in range(len(SIZES))]
    rates = [sampling_rate(BATCH, n) for n in SIZES]
    return [account(q, {per_step: K * j}) for q, j in zip(rates, joins, strict=True)]


def test_accounts_and_rates_of_a_hand_built_schedule() -> None:
    assert [a.count for a in accounts_of(SCHEDULE)] == [15, 15, 10]
    pairs = accounts_of(SCHEDULE, per_step=2)
    assert [(a.count, a.gradients) for a in pairs] == [(15, 30), (15, 30), (10, 20)]
    assert [sampling_rate(BATCH, n) for n in SIZES] == [0.1, 0.05, 0.2]
    assert sampling_rate(0, 80) == 1.0
    assert sampling_rate(100, 80) == 1.0


def test_epsilon_equals_opacus_rdp_accountant_step_by_step() -> None:
    accounts = accounts_of(SCHEDULE)
    ours = client_epsilons(1.1, accounts, DELTA)
    expected = [opacus_epsilon(1.1, a.rate, a.count) for a in accounts]
    assert ours == pytest.approx(expected, rel=1e-9)
    assert worst_epsilon(1.1, accounts, DELTA) == pytest.approx(max(expected), rel=1e-9)


def test_run_plan_reports_the_worst_client_and_epsilon_so_far() -> None:
    cfg = parse_run_config(
        {
            "fl": {"rounds": 4, "local_steps": K, "batch_size": BATCH},
            "privacy": {"noise_multiplier": 1.1, "delta": DELTA},
        }
    )
    plan = make_plan(cfg, SIZES, SCHEDULE)
    expected = max(opacus_epsilon(1.1, q, s) for q, s in [(0.1, 15), (0.05, 15), (0.2, 10)])
    assert plan.epsilon() == pytest.approx(expected, rel=1e-9)
    # After 2 rounds: client 0 has 5 steps at q 0.1, client 1 10 at 0.05, client 2 5 at 0.2.
    so_far = max(opacus_epsilon(1.1, q, s) for q, s in [(0.1, 5), (0.05, 10), (0.2, 5)])
    assert plan.epsilon(2) == pytest.approx(so_far, rel=1e-9)
    assert plan.epsilon(0) == 0.0


@pytest.mark.parametrize("target", [1.0, 3.0])
def test_target_epsilon_lands_within_one_percent(target: float) -> None:
    accounts = accounts_of(SCHEDULE * 10)
    sigma = calibrate_noise(target, accounts, DELTA)
    eps = worst_epsilon(sigma, accounts, DELTA)
    assert abs(eps - target) / target < 0.01
    assert eps <= target


def test_target_epsilon_in_a_config_overrides_sigma() -> None:
    cfg = parse_run_config(
        {
            "fl": {"rounds": 4, "local_steps": K, "batch_size": BATCH},
            "privacy": {"target_epsilon": 2.0, "delta": DELTA},
        }
    )
    plan = make_plan(cfg, SIZES, SCHEDULE)
    assert plan.noise_multiplier != cfg.privacy.noise_multiplier
    assert abs(plan.epsilon() - 2.0) / 2.0 < 0.01
