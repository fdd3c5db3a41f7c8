"""Accounting against Opacus' accountants, and target_epsilon calibration."""

from __future__ import annotations

import contextlib
import math
import signal
import time
from collections.abc import Iterator

import pytest
from opacus.accountants import RDPAccountant

from fedbench.config import load_run_config, parse_run_config
from fedbench.errors import FedbenchError
from fedbench.privacy.accounting import (
    PRV_MAX_POINTS,
    Account,
    account,
    calibrate_noise,
    client_epsilons,
    prv_grid_points,
    sampling_rate,
    worst_epsilon,
)
from fedbench.privacy.plan import make_plan
from fedbench.report.epsilon import describe_privacy

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


def test_a_pair_of_gradients_on_one_batch_is_one_release_at_sigma_over_sqrt2() -> None:
    # Two gradients privatised on the same Poisson batch, each with noise sigma C: one
    # Gaussian of sensitivity sqrt(2) C, i.e. one subsampled release at sigma / sqrt(2).
    acc = RDPAccountant()
    acc.history = [(1.1 / math.sqrt(2), 0.1, 40)]
    pair = worst_epsilon(1.1, [account(0.1, {2: 40})], DELTA)
    assert pair == pytest.approx(acc.get_epsilon(delta=DELTA), rel=1e-12)
    # Counting the two as 2K independent subsampled steps at sigma understates it.
    assert pair > worst_epsilon(1.1, [account(0.1, {1: 80})], DELTA) * 1.3


def issue_45_config(*extra: str):
    """DP-FedSAM on digits as issue 45 ran it (`fedbench epsilon --client-size 239 ...`)."""
    return load_run_config(
        None,
        [
            "data.name=digits",
            "algorithm.name=dp_fedsam",
            "privacy.sampling=poisson",
            "privacy.noise_multiplier=1.1",
            "privacy.clip=1.0",
            "partition.clients=6",
            "fl.participation=0.5",
            "fl.rounds=12",
            "fl.local_steps=20",
            "fl.batch_size=20",
            "seed=5",
            *extra,
        ],
    )


@pytest.mark.parametrize(("accountant", "expected"), [("rdp", 12.9128), ("prv", 11.5114)])
def test_dp_fedsam_is_accounted_as_the_pairs_it_releases(accountant: str, expected: float) -> None:
    # The most-used client joins 7 of the 12 rounds: 140 releases of a pair at q = 20/239.
    # (It used to be 280 steps at sigma 1.1: 9.05, "exact, not understated".)
    text = describe_privacy(issue_45_config(f"privacy.accountant={accountant}"), 239)
    assert text.startswith(f"epsilon {expected:.4f} at delta 1e-05")
    assert "140 releases (280 privatised gradients) at q = 0.08368" in text
    assert "pair of gradients of one batch (noise multiplier sigma/sqrt(2) = 0.7778)" in text
    assert "accounting: exact, not understated" in text


def test_fafed_round_0_releases_one_gradient_and_later_rounds_pairs() -> None:
    cfg = parse_run_config(
        {
            "algorithm": {"name": "dp_fafed"},
            "fl": {"rounds": 4, "local_steps": K, "batch_size": BATCH},
            "privacy": {"noise_multiplier": 1.1, "delta": DELTA},
        }
    )
    plan = make_plan(cfg, SIZES, SCHEDULE)
    # Client 0 joins rounds 0, 2, 3; client 1 rounds 0, 1, 3; client 2 rounds 1, 2.
    assert plan.accounts() == [
        account(0.1, {1: 1, 2: 2 * K}),
        account(0.05, {1: 1, 2: 2 * K}),
        account(0.2, {2: 2 * K}),
    ]
    assert plan.accounts(1) == [account(0.1, {1: 1}), account(0.05, {1: 1}), account(0.2, {})]
    assert (
        "round 0: 1 Poisson-subsampled Gaussian release of one gradient"
        in (plan.accounting()["model"])
    )


def test_counts_drawn_on_from_the_last_epsilon_equal_a_fresh_count() -> None:
    cfg = parse_run_config(
        {
            "fl": {"rounds": 40, "local_steps": K, "batch_size": BATCH},
            "partition": {"clients": 3},
            "privacy": {"noise_multiplier": 1.1, "delta": DELTA},
        }
    )
    schedule = [[c for c in range(3) if (r * 7 + c) % 3] for r in range(40)]
    running = make_plan(cfg, SIZES, schedule)
    for rounds in (0, 3, 4, 17, 40, 12):  # on from the last count, and back
        fresh = make_plan(cfg, SIZES, schedule)
        assert running.accounts(rounds) == fresh.accounts(rounds)
        assert running.epsilon(rounds) == fresh.epsilon(rounds)


@contextlib.contextmanager
def at_most(seconds: float) -> Iterator[None]:
    """Fail (rather than hang) when the block runs longer than `seconds`."""

    def late(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(("rounds", "steps"), [(10**9, 1000), (10**6, 1)])
def test_the_accountant_does_not_slow_down_with_rounds_or_steps(rounds: int, steps: int) -> None:
    # Main drew every round of the schedule: 10**4 rounds took 16.6 s, these did not end.
    describe_privacy(issue_45_config(), 239)  # Opacus imported
    cfg = issue_45_config(f"fl.rounds={rounds}", f"fl.local_steps={steps}")
    with at_most(20.0):
        start = time.perf_counter()
        text = describe_privacy(cfg, 239)
        took = time.perf_counter() - start
    assert took < 5.0, took
    # Beyond SCHEDULE_DRAW_LIMIT rounds every client is accounted in every round: a bound.
    assert f"most-used client 0: {rounds * steps} releases" in text
    assert "accounting: upper bound, overstated" in text and "is longer than the 100,000" in text
    # With every client in every round the count needs no draw and stays exact.
    full = describe_privacy(issue_45_config(f"fl.rounds={rounds}", "fl.participation=1"), 239)
    assert "accounting: exact, not understated" in full


def test_prv_refuses_a_grid_it_cannot_hold_in_one_line(run_cli) -> None:
    # Main: ArrayMemoryError (34.6 GiB) and a traceback.
    cfg = issue_45_config("fl.rounds=1000000", "fl.local_steps=1", "privacy.accountant=prv")
    with pytest.raises(FedbenchError, match=r"privacy\.accountant prv would discretise 1,000,000"):
        describe_privacy(cfg, 239)
    args = ["epsilon", "--client-size", "239", "--set", "algorithm.name=dp_fedavg"]
    for item in ("fl.rounds=1000000", "fl.local_steps=1", "privacy.accountant=prv"):
        args += ["--set", item]
    code, out, err = run_cli(*args)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"over its limit of {PRV_MAX_POINTS:,}; use privacy.accountant rdp" in err
    # Below the limit PRV runs as before.
    assert prv_grid_points([(1.1, 0.08, 10**4)], DELTA) == 6270594 <= PRV_MAX_POINTS
