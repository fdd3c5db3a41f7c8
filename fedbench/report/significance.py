"""Is a row of a report column within noise of the column's best row?

Welch's unequal-variance t-test (scipy.stats.ttest_ind with equal_var=False, two-sided) on the
per-seed values of the two cells, at level 0.05, when both cells have at least MIN_SEEDS seeds.
With fewer seeds nothing is marked: a t-test on two seeds per cell says next to nothing.
A row whose p >= 0.05 is a tie with the best ("≈" in every report), so that a bold cell whose
lead is within noise reads as a tie; an unmarked row differs from the best beyond noise.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

#: Seeds each cell needs before its difference from the best is tested.
MIN_SEEDS = 3
#: Two-sided significance level of the test.
LEVEL = 0.05
TEST_NAME = "Welch's t-test"


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's t-test of equal means; NaN with fewer than 2 values a side.

    Two constant samples (every seed gives the same value, e.g. a deterministic metric) have no
    noise: p is 1 when their values agree and 0 when they differ, where scipy gives NaN.
    scipy's warnings (nearly identical values) are not printed; `welch_test` returns them.
    """
    return welch_test(a, b)[0]


def welch_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, str | None]:
    """(p, warning): welch_p, and scipy's RuntimeWarning as one line (None when it gave none),
    e.g. when the seeds' values are nearly identical and the test loses precision."""
    from scipy import stats

    if len(a) < 2 or len(b) < 2:
        return math.nan, None
    if _constant(a) and _constant(b):
        return (1.0 if a[0] == b[0] else 0.0), None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        p = float(stats.ttest_ind(a, b, equal_var=False).pvalue)
    messages = [str(w.message).split(". ")[0] for w in caught if w.category is RuntimeWarning]
    return p, (messages[0] if messages else None)


def _constant(values: Sequence[float]) -> bool:
    return all(v == values[0] for v in values)


def tie_with_best(best: Sequence[float], other: Sequence[float]) -> tuple[float, bool | None]:
    """(p, tie): tie is None (not tested) when a cell has fewer than MIN_SEEDS values."""
    if len(best) < MIN_SEEDS or len(other) < MIN_SEEDS:
        return math.nan, None
    p = welch_p(best, other)
    return p, p >= LEVEL
