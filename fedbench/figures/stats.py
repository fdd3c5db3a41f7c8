"""Statistics the figures' claims are checked with: Welch's two-sample comparison of means over
seeds (difference, its 95% Welch-Satterthwaite interval and the two-sided p-value), the same on
a log scale for ratios of positive quantities (variances, drifts), and "is A the best row and
beyond noise of the runner-up" for the figures that rank a table's rows."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Two-sided level of every interval and test.
LEVEL = 0.05


@dataclass(frozen=True)
class Comparison:
    """mean(a) - mean(b) (or, for `ratio`, exp(mean log a - mean log b)) with its 95% interval
    and Welch's two-sided p-value; NaN interval and p with fewer than 2 values a side."""

    estimate: float
    low: float
    high: float
    p: float
    n_a: int
    n_b: int

    @property
    def interval(self) -> tuple[float, float] | None:
        return None if math.isnan(self.low) else (self.low, self.high)


def welch(a: Sequence[float], b: Sequence[float]) -> Comparison:
    """Welch's unequal-variance comparison of mean(a) and mean(b): the difference, its 95%
    interval (t quantile at the Welch-Satterthwaite degrees of freedom) and the p-value.

    Two constant samples have no noise: the interval is the difference itself and p is 0 when
    they differ, 1 when they agree (scipy gives NaN)."""
    from scipy import stats

    n_a, n_b = len(a), len(b)
    if n_a == 0 or n_b == 0:
        return Comparison(math.nan, math.nan, math.nan, math.nan, n_a, n_b)
    mean_a, mean_b = sum(a) / n_a, sum(b) / n_b
    diff = mean_a - mean_b
    if n_a < 2 or n_b < 2:
        return Comparison(diff, math.nan, math.nan, math.nan, n_a, n_b)
    var_a = sum((x - mean_a) ** 2 for x in a) / (n_a - 1)
    var_b = sum((x - mean_b) ** 2 for x in b) / (n_b - 1)
    se2 = var_a / n_a + var_b / n_b
    if se2 == 0.0:
        return Comparison(diff, diff, diff, 0.0 if diff != 0 else 1.0, n_a, n_b)
    df = se2**2 / ((var_a / n_a) ** 2 / (n_a - 1) + (var_b / n_b) ** 2 / (n_b - 1))
    se = math.sqrt(se2)
    half = float(stats.t.ppf(1 - LEVEL / 2, df)) * se
    p = float(2 * stats.t.sf(abs(diff) / se, df))
    return Comparison(diff, diff - half, diff + half, p, n_a, n_b)


def ratio(a: Sequence[float], b: Sequence[float]) -> Comparison:
    """Geometric-mean ratio a / b with Welch's interval on log a - log b: the scale on which
    variances and squared drifts compare (a 10x change reads the same at any magnitude).
    Non-positive values cannot be logged: a ratio of NaN."""
    if any(x <= 0 or not math.isfinite(x) for x in [*a, *b]):
        return Comparison(math.nan, math.nan, math.nan, math.nan, len(a), len(b))
    logged = welch([math.log(x) for x in a], [math.log(x) for x in b])
    return Comparison(
        math.exp(logged.estimate),
        math.exp(logged.low) if math.isfinite(logged.low) else math.nan,
        math.exp(logged.high) if math.isfinite(logged.high) else math.nan,
        logged.p,
        logged.n_a,
        logged.n_b,
    )


def exceeds(comparison: Comparison, null: float) -> bool | None:
    """The verdict of "the estimate is above `null`" (0 for a difference, 1 for a ratio): True
    when the whole 95% interval lies above it, False when the whole interval lies below it (the
    opposite holds beyond noise), None when the interval contains it (within noise) or there is
    no interval (fewer than 2 values a side)."""
    if comparison.interval is None:
        return None
    if comparison.low > null:
        return True
    return False if comparison.high < null else None


@dataclass(frozen=True)
class Ranking:
    """Is `claimed` the best row? `best` is the row with the best mean, `rival` the best row
    other than `claimed`; `comparison` is claimed - rival (oriented so that > 0 favours claimed:
    for lower-is-better metrics rival - claimed)."""

    claimed: str
    best: str
    rival: str
    comparison: Comparison

    @property
    def holds(self) -> bool | None:
        return exceeds(self.comparison, 0.0)


def rank(values: Mapping[str, Sequence[float]], claimed: str, *, lower_is_better: bool) -> Ranking:
    """Compare row `claimed` with its strongest rival (the other row with the best mean) by
    Welch's test on the per-seed values: the claim holds when the interval of the advantage of
    `claimed` lies above 0, does not hold when it lies below 0 (the rival is better beyond
    noise), and is undecided when it contains 0."""
    from fedbench.errors import FedbenchError

    if claimed not in values:
        raise FedbenchError(f"row {claimed!r} is not among the rows that ran: {', '.join(values)}")
    others = {k: v for k, v in values.items() if k != claimed and v}
    if not others:
        raise FedbenchError(f"row {claimed!r} has no other row to be compared with")
    means = {k: sum(v) / len(v) for k, v in values.items() if v}
    pick = min if lower_is_better else max
    best = pick(means, key=lambda k: means[k])
    rival = pick(others, key=lambda k: means[k])
    a, b = values[claimed], values[rival]
    comparison = welch(b, a) if lower_is_better else welch(a, b)
    return Ranking(claimed, best, rival, comparison)
