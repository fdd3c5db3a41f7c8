"""The reports' statistics (fedbench.report.significance) against hand-computed values and
scipy.stats, in float64: the paired t-test where two cells ran the same seeds, Welch's
otherwise, 95 % t intervals and Holm's correction."""

from __future__ import annotations

import math
import statistics

import pytest
from scipy import stats

from fedbench.report.significance import (
    PAIRED,
    WELCH,
    difference_test,
    holm,
    mean_ci,
    paired_seeds,
    tie_with_best,
    welch_ci,
)

A = [90.0, 91.0, 92.0, 94.0]
B = [89.0, 91.5, 90.5, 92.0]


def test_paired_test_matches_the_formula_and_scipy() -> None:
    d = [x - y for x, y in zip(A, B, strict=True)]  # 1.0, -0.5, 1.5, 2.0
    t = statistics.mean(d) / (statistics.stdev(d) / math.sqrt(len(d)))
    by_hand = 2 * stats.t.sf(abs(t), len(d) - 1)
    test = difference_test(A, B, [0, 1, 2, 3], [0, 1, 2, 3])
    assert test.kind == PAIRED
    assert test.p == pytest.approx(by_hand, rel=1e-12)
    assert test.p == pytest.approx(0.1611618472135195, rel=1e-12)  # scipy 1.17 ttest_rel
    assert test.p == pytest.approx(stats.ttest_rel(A, B).pvalue, rel=1e-12)
    assert test.diff == pytest.approx(1.0, rel=1e-15)
    ci = stats.ttest_rel(A, B).confidence_interval()
    assert test.ci == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert test.ci == pytest.approx((-0.7187174409291541, 2.7187174409291543), rel=1e-12)


def test_pairs_are_matched_by_seed_not_by_position() -> None:
    # B listed in another seed order: the pairs are (A seed s, B seed s).
    shuffled = difference_test(A, [B[2], B[0], B[3], B[1]], [0, 1, 2, 3], [2, 0, 3, 1])
    assert shuffled.p == pytest.approx(stats.ttest_rel(A, B).pvalue, rel=1e-12)


def test_welch_where_the_seeds_differ_matches_the_formula_and_scipy() -> None:
    va, vb = statistics.variance(A) / len(A), statistics.variance(B) / len(B)
    t = (statistics.mean(A) - statistics.mean(B)) / math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va**2 / (len(A) - 1) + vb**2 / (len(B) - 1))
    test = difference_test(A, B, [0, 1, 2, 3], [4, 5, 6, 7])
    assert test.kind == WELCH
    assert test.p == pytest.approx(2 * stats.t.sf(abs(t), dof), rel=1e-12)
    assert test.p == pytest.approx(0.39238730498981034, rel=1e-12)
    ci = stats.ttest_ind(A, B, equal_var=False).confidence_interval()
    assert test.ci == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert welch_ci(A, B) == pytest.approx((-1.6835294289393317, 3.6835294289393317), rel=1e-12)
    # No seeds known, a seed listed twice, or other seeds: not paired.
    assert difference_test(A, B).kind == WELCH
    assert not paired_seeds([0, 0, 1, 2], [0, 1, 2, 2])
    assert not paired_seeds([0, 1, 2], [0, 1, 3]) and paired_seeds([0, 1, 2], [2, 1, 0])


def test_degenerate_samples() -> None:
    # Every paired difference the same: no noise; p 0 where they differ, 1 where they agree,
    # and no member of the family Holm corrects.
    exact = difference_test([1.0, 2.0, 3.0], [0.0, 1.0, 2.0], [0, 1, 2], [0, 1, 2])
    assert exact.p == 0.0 and exact.noiseless and math.isnan(exact.family_p)
    assert not difference_test(A, B, [0, 1, 2, 3], [0, 1, 2, 3]).noiseless
    assert difference_test([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0, 1, 2], [0, 1, 2]).p == 1.0
    assert difference_test([1.0, 1.0, 1.0], [2.0, 2.0, 2.0]).p == 0.0  # Welch, constant
    one = difference_test([1.0], [2.0, 3.0])
    assert math.isnan(one.p) and not one.tested and one.kind == ""
    # The report tests from 3 seeds a cell.
    assert not tie_with_best([1.0, 2.0], [1.0, 2.0], [0, 1], [0, 1]).tested


def test_confidence_interval_of_a_mean() -> None:
    # [1, 2, 3, 4]: mean 2.5, s = sqrt(5/3), t(0.975, 3) = 3.182446305284...
    half = 3.1824463052837078 * math.sqrt(5 / 3) / 2
    assert mean_ci([1.0, 2.0, 3.0, 4.0]) == pytest.approx((2.5 - half, 2.5 + half), rel=1e-12)
    assert mean_ci([1.0, 2.0, 3.0, 4.0]) == pytest.approx(
        (0.4457397432394794, 4.554260256760521), rel=1e-12
    )
    assert mean_ci([5.0, 5.0]) == (5.0, 5.0)
    assert all(math.isnan(v) for v in mean_ci([5.0]))


def test_holm_step_down_by_hand() -> None:
    # sorted tested: 0.005 x4 = 0.02, 0.01 x3 = 0.03, 0.03 x2 = 0.06, 0.04 x1 = 0.04 -> 0.06
    adjusted = holm([0.01, 0.04, 0.03, math.nan, 0.005])
    assert adjusted[:3] == pytest.approx([0.03, 0.06, 0.06], rel=1e-12)
    assert math.isnan(adjusted[3]) and adjusted[4] == pytest.approx(0.02, rel=1e-12)
    assert holm([0.6, 0.7]) == [1.0, 1.0]  # capped at 1
    assert holm([]) == []
