"""Privacy accounting with Opacus' accountants (docs/privacy.md, "What the accountant counts").

What a client releases is an `Account`: every release is one Poisson-subsampled batch (rate
q_i = B / n_i) on which g gradients are privatised, each clipped per sample to C and noised with
its own N(0, sigma^2 C^2 I). One sample moves each of the g sums by at most C, so the g noisy
sums together are one Gaussian release of L2 sensitivity sqrt(g) C: noise multiplier
sigma / sqrt(g) (`release_noise`). That holds when the later gradients are taken at points that
depend on the earlier noisy ones (SAM's ascent point): RDP composes additively, g times
alpha / (2 sigma^2). So DP-FedSAM's step is ONE subsampled release at sigma / sqrt(2), not two
at sigma: its batch is drawn once and both gradients see the same samples. How many gradients
a step privatises comes from the algorithm (`Algorithm.round_gradients`), which the sequential
executor checks against the calls of every private client round.

Releases compose in closed form (RDP: count times the RDP of one release, per order), so the
cost does not grow with the number of steps; the PRV accountant's grid does grow with them, and
is refused above `PRV_MAX_POINTS` (one line) rather than run out of memory. epsilon_i comes from
the RDP (or PRV) accountant at delta; a run reports epsilon = max_i epsilon_i. Fixed-size batches
are accounted as Poisson sampling with rate q (the usual approximation, which can understate
epsilon: fedbench.privacy.status; `sampling: poisson` draws the accounted mechanism itself). The
client schedule is known before training, so `target_epsilon` calibrates sigma for the
worst-case client.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from fedbench.errors import FedbenchError

#: Points of the PRV accountant's discretisation grid above which `prv` is refused: its peak
#: memory is about 300 bytes a point (1.9 GB at 6.3 million points, 6.5 GB at about 25
#: million; Opacus 1.6 on the CPU), and the grid grows about linearly with the releases
#: (10**4 subsampled Gaussian steps at q 0.08, sigma 1.1: 6.3 million points; 10**6: 2.8
#: billion, 21 GiB an array).
PRV_MAX_POINTS = 1 << 23
#: Opacus' PRV defaults (PRVAccountant.get_epsilon), with which the grid is sized.
PRV_EPS_ERROR = 0.01


def sampling_rate(batch_size: int, n_local: int) -> float:
    """q = B / n_i (1 when a step uses the whole local set)."""
    if batch_size == 0 or batch_size >= n_local:
        return 1.0
    return batch_size / n_local


def release_noise(sigma: float, gradients: int) -> float:
    """The noise multiplier of one release of `gradients` gradients privatised on one batch,
    each with noise sigma * C: sigma / sqrt(g) (module docstring)."""
    return sigma / math.sqrt(gradients)


@dataclass(frozen=True, order=True)
class Account:
    """What one client releases: every release at sampling rate `rate`, and `releases` the
    (g, count) pairs, g ascending: `count` releases of g gradients privatised on one batch."""

    rate: float
    releases: tuple[tuple[int, int], ...] = ()

    @property
    def count(self) -> int:
        """The number of releases (subsampled batches with at least one private gradient)."""
        return sum(count for _, count in self.releases)

    @property
    def gradients(self) -> int:
        """The privatised gradients of all releases together."""
        return sum(g * count for g, count in self.releases)

    def history(self, sigma: float) -> list[tuple[float, float, int]]:
        """Opacus' (noise multiplier, sample rate, steps) entries of these releases."""
        return [(release_noise(sigma, g), self.rate, count) for g, count in self.releases]

    def dominated_by(self, other: Account) -> bool:
        """epsilon of `other` >= this one's at any sigma: a rate at least this one's and at
        least as many releases of every kind (epsilon grows with both)."""
        theirs = dict(other.releases)
        return other.rate >= self.rate and all(theirs.get(g, 0) >= c for g, c in self.releases)


def account(rate: float, per_gradients: Mapping[int, int]) -> Account:
    """The Account of releases at `rate`, {g: count} (g 0 and count 0 release nothing)."""
    releases = tuple(sorted((g, c) for g, c in per_gradients.items() if g > 0 and c > 0))
    return Account(float(rate), releases)


def prv_grid_points(history: Sequence[tuple[float, float, int]], delta: float) -> int:
    """The size of the grid on which Opacus' PRVAccountant discretises `history`: its
    `_get_domain` (safe domain size L from RDP, mesh eps_error / sqrt(T log(12/delta_err) / 2))
    with its default errors, computed without allocating the grid."""
    from opacus.accountants.analysis.prv import (
        Domain,
        PoissonSubsampledGaussianPRV,
        compute_safe_domain_size,
    )

    delta_error = delta / 1000
    prvs = [PoissonSubsampledGaussianPRV(rate, noise) for noise, rate, _ in history]
    steps = [count for _, _, count in history]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        half = compute_safe_domain_size(prvs, steps, PRV_EPS_ERROR, delta_error)
    mesh = PRV_EPS_ERROR / math.sqrt(sum(steps) * math.log(12 / delta_error) / 2)
    return Domain.create_aligned(-half, half, mesh).size


def _check_prv_size(history: list[tuple[float, float, int]], delta: float) -> None:
    points = prv_grid_points(history, delta)
    if points > PRV_MAX_POINTS:
        releases = sum(count for _, _, count in history)
        raise FedbenchError(
            f"privacy.accountant prv would discretise {releases:,} releases on a grid of "
            f"{points:,} points (about {points * 300 / 2**30:.3g} GiB), over its limit of "
            f"{PRV_MAX_POINTS:,}; use privacy.accountant rdp (closed form for any number of "
            "steps) or fewer rounds or local steps"
        )


@lru_cache(maxsize=4096)
def _epsilon(sigma: float, client: Account, delta: float, accountant: str) -> float:
    if client.count == 0:
        return 0.0
    if sigma == 0:
        return math.inf
    from opacus.accountants import PRVAccountant, RDPAccountant

    history = client.history(sigma)
    if accountant == "prv":
        _check_prv_size(history, delta)
    acc = RDPAccountant() if accountant == "rdp" else PRVAccountant()
    # RDP: each entry is count x the RDP of one release at every order (closed form).
    acc.history = history
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus warns about optimal orders at the range's edge
        return float(acc.get_epsilon(delta=delta))


def client_epsilons(
    sigma: float, accounts: Sequence[Account], delta: float, accountant: str = "rdp"
) -> list[float]:
    """epsilon_i of every client (identical accounts are computed once)."""
    return [_epsilon(float(sigma), a, float(delta), accountant) for a in accounts]


def dominant(accounts: Iterable[Account]) -> list[Account]:
    """The accounts not dominated by another (`Account.dominated_by`): the only ones whose
    epsilon can be the largest."""
    front: list[Account] = []
    for a in sorted(set(accounts), key=lambda a: (-a.rate, -a.gradients, a.releases)):
        if not any(a.dominated_by(b) for b in front):
            front.append(a)
    return front


def worst_epsilon(
    sigma: float, accounts: Sequence[Account], delta: float, accountant: str = "rdp"
) -> float:
    """epsilon = max_i epsilon_i (0 if no client has released anything yet)."""
    front = dominant(accounts)
    return max(client_epsilons(sigma, front, delta, accountant), default=0.0)


def calibrate_noise(
    target_epsilon: float,
    accounts: Sequence[Account],
    delta: float,
    accountant: str = "rdp",
    rtol: float = 2e-3,
) -> float:
    """The sigma at which the worst client ends at target_epsilon (from below, within rtol)."""
    front = dominant(accounts)
    if not any(a.count for a in front):
        raise FedbenchError("target_epsilon is set but no client ever trains; check fl.rounds")

    def eps(sigma: float) -> float:
        return max(client_epsilons(sigma, front, delta, accountant))

    lo, hi = 0.0, 1.0
    while eps(hi) > target_epsilon:
        lo, hi = hi, hi * 2
        if hi > 1e4:
            raise FedbenchError(
                f"privacy.target_epsilon {target_epsilon} needs a noise multiplier above 1e4; "
                "raise the target or reduce rounds / local_steps"
            )
    # eps(hi) <= target < eps(lo): bisect on sigma until eps(hi) is within rtol of the target.
    for _ in range(100):
        if target_epsilon - eps(hi) <= rtol * target_epsilon:
            break
        mid = (lo + hi) / 2 if lo > 0 else hi / 2
        if eps(mid) > target_epsilon:
            lo = mid
        else:
            hi = mid
    return hi
