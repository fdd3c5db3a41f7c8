"""Is one row within seed noise of another? The tests every report and `fedbench compare` make.

Paired where the two cells ran the same seeds: in every row a seed draws the same initial model
and (at the same participation) the same clients each round (the partition is
`partition.seed`'s, the same for every run), so row A's seed s and row B's seed s are a matched
pair, and a paired t-test over the seeds' differences (scipy.stats.ttest_rel) removes the noise
the pair shares. Where the seeds differ
(a failed seed in one row, two folders run at other seeds), Welch's unequal-variance t-test
(scipy.stats.ttest_ind, equal_var=False). Both two-sided, at level 0.05, when each cell has at
least MIN_SEEDS seeds; with fewer nothing is tested: a t-test on two seeds says next to nothing.

One report (or one `fedbench compare`) makes many tests; their p-values are Holm-corrected
(Holm 1979, step-down Bonferroni: controls the family-wise error at LEVEL) over all of them, and
a row is a tie with the best ("≈") when its corrected p >= LEVEL. A comparison without noise
(every seed's difference the same: a deterministic metric) is no test: p is 0 or 1 as it is,
and it does not enlarge the family.

Confidence intervals are Student t intervals at 95 %: of a cell's mean over its seeds, and of a
difference (paired: of the mean difference; Welch: with Welch-Satterthwaite degrees of freedom).
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

#: Seeds each cell needs before its difference from another is tested.
MIN_SEEDS = 3
#: Two-sided significance level of the test (family-wise, after Holm's correction).
LEVEL = 0.05
#: Coverage of the confidence intervals.
CONFIDENCE = 0.95
PAIRED = "paired"
WELCH = "welch"
#: The tests by name, as reports print them.
TEST_NAMES = {PAIRED: "paired t-test over seeds", WELCH: "Welch's t-test"}
TEST_NAME = "paired t-test over seeds where the rows ran the same seeds, else Welch's t-test"
CORRECTION = "Holm-corrected"


@dataclass(frozen=True)
class Test:
    """One two-sided test of equal means: p (NaN: not tested), which test ('paired', 'welch';
    '' when not tested), the difference of means a - b with its 95 % interval, and scipy's
    RuntimeWarning as one line (None when it gave none)."""

    p: float
    kind: str
    diff: float
    ci: tuple[float, float]
    warning: str | None = None
    #: No noise to test against (every seed's difference the same, e.g. a deterministic metric
    #: such as comm): p is 0 or 1, and the comparison is not one of the family Holm corrects.
    noiseless: bool = False

    @property
    def tested(self) -> bool:
        return bool(self.kind) and not math.isnan(self.p)

    @property
    def family_p(self) -> float:
        """p as a member of the family Holm corrects: NaN where not tested or noiseless."""
        return self.p if self.tested and not self.noiseless else math.nan


def paired_seeds(a_seeds: Sequence[int] | None, b_seeds: Sequence[int] | None) -> bool:
    """Whether two cells pair seed by seed: both list their seeds, each once, and the same ones."""
    if a_seeds is None or b_seeds is None:
        return False
    return len(set(a_seeds)) == len(a_seeds) and set(a_seeds) == set(b_seeds)


def difference_test(
    a: Sequence[float],
    b: Sequence[float],
    a_seeds: Sequence[int] | None = None,
    b_seeds: Sequence[int] | None = None,
    min_seeds: int = 2,
) -> Test:
    """The test of a against b: paired (by seed) when `paired_seeds`, else Welch's; not tested
    (p NaN, kind '') with fewer than `min_seeds` values a side.

    Constant samples have no noise: where every paired difference is the same (or both samples
    are constant, Welch), p is 1 when the means agree and 0 when they differ, where scipy gives
    NaN. scipy's warnings (nearly identical values) are not printed but returned."""
    diff = _mean(a) - _mean(b) if a and b else math.nan
    if len(a) < min_seeds or len(b) < min_seeds:
        return Test(math.nan, "", diff, (math.nan, math.nan))
    if paired_seeds(a_seeds, b_seeds):
        by_seed = dict(zip(b_seeds or [], b, strict=True))
        d = [x - by_seed[s] for x, s in zip(a, a_seeds or [], strict=True)]
        ci = mean_ci(d)
        if _constant(d):
            return Test(1.0 if d[0] == 0 else 0.0, PAIRED, diff, ci, noiseless=True)
        p, warning = _scipy_p("ttest_rel", a, [by_seed[s] for s in a_seeds or []])
        return Test(p, PAIRED, diff, ci, warning)
    ci = welch_ci(a, b)
    if _constant(a) and _constant(b):
        return Test(1.0 if a[0] == b[0] else 0.0, WELCH, diff, ci, noiseless=True)
    p, warning = _scipy_p("ttest_ind", a, b, equal_var=False)
    return Test(p, WELCH, diff, ci, warning)


def _scipy_p(
    name: str, a: Sequence[float], b: Sequence[float], **kw: bool
) -> tuple[float, str | None]:
    from scipy import stats

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        p = float(getattr(stats, name)(list(a), list(b), **kw).pvalue)
    messages = [str(w.message).split(". ")[0] for w in caught if w.category is RuntimeWarning]
    return p, (messages[0] if messages else None)


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Welch's t-test of equal means; NaN with fewer than 2 values a side."""
    return welch_test(a, b)[0]


def welch_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, str | None]:
    """(p, warning) of Welch's t-test (difference_test without seeds)."""
    test = difference_test(a, b)
    return test.p, test.warning


def _t_quantile(dof: float) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, dof))


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """The 95 % Student t interval of the mean of `values` (mean ± t(n-1) s / sqrt(n)); NaN with
    fewer than 2 values, the mean itself when every value is the same."""
    n = len(values)
    if n < 2:
        return math.nan, math.nan
    mean = _mean(values)
    half = _t_quantile(n - 1) * statistics.stdev(values) / math.sqrt(n)
    return mean - half, mean + half


def welch_ci(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """The 95 % interval of mean(a) - mean(b) without equal variances (Welch-Satterthwaite
    degrees of freedom); NaN with fewer than 2 values a side."""
    if len(a) < 2 or len(b) < 2:
        return math.nan, math.nan
    diff = _mean(a) - _mean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    if va + vb == 0:
        return diff, diff
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = _t_quantile(dof) * math.sqrt(va + vb)
    return diff - half, diff + half


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (the order of `pvalues`; NaN, an untested entry, stays
    NaN and does not count towards the family): the i-th smallest of m is multiplied by m - i + 1,
    then made non-decreasing and capped at 1. Reject where the adjusted p < LEVEL."""
    tested = sorted((p, i) for i, p in enumerate(pvalues) if not math.isnan(p))
    m = len(tested)
    out = [math.nan] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _constant(values: Sequence[float]) -> bool:
    return all(v == values[0] for v in values)


def tie_with_best(
    best: Sequence[float],
    other: Sequence[float],
    best_seeds: Sequence[int] | None = None,
    other_seeds: Sequence[int] | None = None,
) -> Test:
    """The test of `other` against the column's best row; not tested (kind '') when a cell has
    fewer than MIN_SEEDS values. Whether it is a tie is decided after Holm's correction."""
    return difference_test(best, other, best_seeds, other_seeds, min_seeds=MIN_SEEDS)
