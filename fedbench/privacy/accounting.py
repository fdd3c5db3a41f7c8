"""Privacy accounting with Opacus' accountants (docs/algorithms.md, "Differential privacy").

Client i takes steps_i = K * g * (rounds in which it participated) subsampled Gaussian steps
(g gradients per local step: 2 for DP-FedSAM), each with sampling rate q_i = B / n_i and noise
multiplier sigma. epsilon_i comes from Opacus' RDP (or PRV) accountant at delta; a run reports
epsilon = max_i epsilon_i. Fixed-size batches are accounted as Poisson sampling with rate q (the
usual approximation, which can understate epsilon: fedbench.privacy.status; `sampling: poisson`
draws the accounted mechanism itself). The client schedule is known
before training, so `target_epsilon` calibrates sigma for the worst-case client.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from functools import lru_cache

from fedbench.errors import FedbenchError


def sampling_rate(batch_size: int, n_local: int) -> float:
    """q = B / n_i (1 when a step uses the whole local set)."""
    if batch_size == 0 or batch_size >= n_local:
        return 1.0
    return batch_size / n_local


def client_steps(
    schedule: Sequence[Iterable[int]], num_clients: int, local_steps: int, per_step: int = 1
) -> list[int]:
    """steps_i = K * per_step * (rounds of `schedule` in which client i took part)."""
    steps = [0] * num_clients
    for clients in schedule:
        for c in clients:
            steps[c] += local_steps * per_step
    return steps


@lru_cache(maxsize=4096)
def _epsilon(sigma: float, rate: float, steps: int, delta: float, accountant: str) -> float:
    if steps == 0:
        return 0.0
    if sigma == 0:
        return math.inf
    from opacus.accountants import PRVAccountant, RDPAccountant

    acc = RDPAccountant() if accountant == "rdp" else PRVAccountant()
    acc.history = [(sigma, rate, steps)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus warns about optimal orders at the range's edge
        return float(acc.get_epsilon(delta=delta))


def client_epsilons(
    sigma: float,
    rates: Sequence[float],
    steps: Sequence[int],
    delta: float,
    accountant: str = "rdp",
) -> list[float]:
    """epsilon_i of every client (identical (q_i, steps_i) pairs are computed once)."""
    return [
        _epsilon(float(sigma), float(q), int(s), float(delta), accountant)
        for q, s in zip(rates, steps, strict=True)
    ]


def _dominant(rates: Sequence[float], steps: Sequence[int]) -> list[tuple[float, int]]:
    """The (q, steps) pairs not dominated by another (epsilon grows with both)."""
    pairs = sorted(set(zip(rates, steps, strict=True)), key=lambda p: (-p[0], -p[1]))
    front, best_steps = [], -1
    for q, s in pairs:
        if s > best_steps:
            front.append((q, s))
            best_steps = s
    return front


def worst_epsilon(
    sigma: float,
    rates: Sequence[float],
    steps: Sequence[int],
    delta: float,
    accountant: str = "rdp",
) -> float:
    """epsilon = max_i epsilon_i (0 if no client has trained yet)."""
    front = _dominant(rates, steps)
    if not front:
        return 0.0
    qs, ss = zip(*front, strict=True)
    return max(client_epsilons(sigma, qs, ss, delta, accountant))


def calibrate_noise(
    target_epsilon: float,
    rates: Sequence[float],
    steps: Sequence[int],
    delta: float,
    accountant: str = "rdp",
    rtol: float = 2e-3,
) -> float:
    """The sigma at which the worst client ends at target_epsilon (from below, within rtol)."""
    front = _dominant(rates, steps)
    if not front or max(s for _, s in front) == 0:
        raise FedbenchError("target_epsilon is set but no client ever trains; check fl.rounds")
    qs, ss = zip(*front, strict=True)

    def eps(sigma: float) -> float:
        return max(client_epsilons(sigma, qs, ss, delta, accountant))

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
