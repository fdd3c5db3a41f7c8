"""The claim statistics on data with a known answer: Welch's interval and p against hand
values and scipy, the log-ratio interval, the coverage of the interval, and the ranking."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedbench.errors import FedbenchError
from fedbench.figures.stats import exceeds, rank, ratio, welch


def test_welch_matches_hand_computation_and_scipy() -> None:
    # Equal variances (1) and sizes (3): se^2 = 2/3, Welch-Satterthwaite df = 4.
    c = welch([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    half = 2.7764451051977987 * math.sqrt(2 / 3)  # t_{0.975, 4}
    assert c.estimate == pytest.approx(-3.0, abs=1e-12)
    assert c.interval == pytest.approx((-3.0 - half, -3.0 + half), abs=1e-9)
    a, b = [0.3, 1.9, 2.2, 0.8], [0.1, -0.4, 0.0]
    c = welch(a, b)
    assert c.p == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue, rel=1e-10)
    assert exceeds(c, 0.0) is (True if c.low > 0 else None)  # p > 0.05: inside the interval
    assert exceeds(welch([5.0, 5.1, 5.2], [1.0, 1.1, 1.2]), 0.0) is True
    assert exceeds(welch([1.0, 1.1, 1.2], [5.0, 5.1, 5.2]), 0.0) is False


def test_welch_interval_covers_the_true_difference_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(2000):
        a = rng.normal(1.0, 1.0, size=4)
        b = rng.normal(0.0, 3.0, size=6)  # unequal variances: where Welch is needed
        c = welch(a.tolist(), b.tolist())
        hits += c.low <= 1.0 <= c.high
    assert 0.93 <= hits / 2000 <= 0.97


def test_welch_degenerate_samples() -> None:
    c = welch([2.0, 2.0], [1.0, 1.0])
    assert (c.estimate, c.interval, c.p) == (1.0, (1.0, 1.0), 0.0)
    assert welch([1.0, 1.0], [1.0, 1.0]).p == 1.0
    one = welch([1.0], [0.0, 1.0])
    assert one.estimate == pytest.approx(0.5) and one.interval is None
    assert exceeds(one, 0.0) is None


def test_ratio_recovers_an_exact_factor() -> None:
    b = [1e-9, 2e-9, 4e-9]
    c = ratio([10 * x for x in b], b)
    assert c.estimate == pytest.approx(10.0, rel=1e-12)
    assert c.low < 10.0 < c.high
    # A constant factor on constant data is exact: the interval is the factor itself.
    assert ratio([5e-3, 5e-3], [1e-3, 1e-3]).interval == pytest.approx((5.0, 5.0))
    assert math.isnan(ratio([0.0, 1.0], [1.0, 2.0]).estimate)


def test_rank_names_the_runner_up_and_decides() -> None:
    values = {"A": [0.10, 0.11, 0.12], "B": [0.30, 0.31, 0.29], "C": [0.50, 0.52, 0.51]}
    r = rank(values, "A", lower_is_better=True)
    assert (r.best, r.rival, r.holds) == ("A", "B", True)
    assert r.comparison.estimate == pytest.approx(0.19)  # rival - claimed, > 0 favours A
    r = rank(values, "B", lower_is_better=True)
    assert (r.best, r.rival, r.holds) == ("A", "A", False)
    r = rank(values, "C", lower_is_better=False)
    assert (r.best, r.rival, r.holds) == ("C", "B", True)
    tie = rank({"A": [1.0, 2.0, 3.0], "B": [1.1, 2.1, 2.9]}, "A", lower_is_better=False)
    assert tie.holds is None  # within noise of the runner-up: undecided
    with pytest.raises(FedbenchError, match="not among the rows"):
        rank(values, "D", lower_is_better=True)
