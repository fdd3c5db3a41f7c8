"""How a reported epsilon relates to the mechanism that ran: its accounting status and the
direction of its error, worded in this one place for every reader (summary.json's
`privacy_accounting`, `fedbench epsilon`, the end-of-run line, `fedbench runs`).

The accountant (RDP or PRV) analyses the Poisson-subsampled Gaussian mechanism. Whether the
epsilon it reports holds for the run depends on what the run drew (`privacy.sampling`):

- `exact`: the run drew the accounted mechanism (Poisson sampling). The epsilon is the
  accountant's bound for what ran: never understated.
- `upper bound`: the run drew the accounted mechanism but released less than was accounted
  (clients that ran fewer steps, or dropped out): overstated, safe to publish.
- `approximate`: the run drew another mechanism (fixed-size batches or client draws) accounted
  as if Poisson. This can UNDERSTATE epsilon: shuffled fixed-size batches accounted as Poisson
  may spend more privacy than reported (Chua, Ghazi, Kamath, Kumar, Manurangsi, Sinha, Zhang,
  "How Private are DP-SGD Implementations?", ICML 2024), and so can fixed-size sampling without
  replacement (Lebeda, Regehr, Kamath, Steinke, "Avoiding Pitfalls for Privacy Accounting of
  Subsampled Mechanisms under Composition", 2024). Not an epsilon to publish as a guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EXACT = "exact"
APPROXIMATE = "approximate"
UPPER_BOUND = "upper bound"

#: The direction of each status's error, as every reader prints it.
DIRECTIONS = {
    EXACT: "not understated",
    UPPER_BOUND: "overstated",
    APPROXIMATE: "may be understated",
}

#: Why a fixed-size draw is not the accounted mechanism, per privacy level.
_FIXED_WHY = {
    "sample": "each client's batches are B samples without replacement from a shuffled "
    "permutation (reshuffled every local epoch), accounted as Poisson sampling at q = B/n_i; "
    "shuffled batches accounted as Poisson can understate epsilon (Chua et al., ICML 2024)",
    "client": "exactly S of the N clients are drawn without replacement each round, accounted "
    "as Poisson sampling at q = S/N; fixed-size sampling accounted as Poisson can understate "
    "epsilon (Lebeda et al. 2024)",
}
_EXACT_WHY = {
    "sample": "Poisson batch sampling at q = B/n_i, the accounted mechanism",
    "client": "Poisson client sampling at q = S/N, the accounted mechanism",
}
_FIX = "; set privacy.sampling poisson for an epsilon that is not understated"


@dataclass(frozen=True)
class AccountingStatus:
    """A reported epsilon's status (exact | approximate | upper bound), the direction of its
    error and why."""

    accounting: str
    why: str

    @property
    def direction(self) -> str:
        return DIRECTIONS[self.accounting]

    def as_dict(self, model: str) -> dict[str, str]:
        """summary.json's `privacy_accounting`: the accounted mechanism (`model`) and the rest."""
        return {
            "model": model,
            "accounting": self.accounting,
            "direction": self.direction,
            "why": self.why,
        }


def accounting_status(
    level: str, sampling: str, releases_less: str | None = None
) -> AccountingStatus:
    """The status of a run's epsilon at privacy `level` (sample | client) under `sampling`
    (fixed | poisson); `releases_less`: why the run releases less than is accounted (clients
    run fewer steps, or drop out), or None."""
    if sampling != "poisson":
        return AccountingStatus(APPROXIMATE, _FIXED_WHY[level] + _FIX)
    if releases_less is not None:
        return AccountingStatus(UPPER_BOUND, releases_less)
    return AccountingStatus(EXACT, _EXACT_WHY[level])


def direction_of(accounting: dict[str, Any]) -> str:
    """The direction of a `privacy_accounting` record, also of one written before records
    carried it (derived from its status)."""
    direction = accounting.get("direction")
    if isinstance(direction, str):
        return direction
    return DIRECTIONS.get(str(accounting.get("accounting")), "unknown")


def short_label(accounting: object) -> str:
    """`approximate, may be understated`: a table cell for a `privacy_accounting` record as
    read back from a summary.json (`not recorded` without a usable one)."""
    if not isinstance(accounting, dict) or not isinstance(accounting.get("accounting"), str):
        return "not recorded"
    return f"{accounting['accounting']}, {direction_of(accounting)}"


def status_line(accounting: dict[str, Any]) -> str:
    """`accounting: approximate, may be understated (why)`: the line `fedbench epsilon` prints."""
    return f"accounting: {short_label(accounting)} ({accounting.get('why', '')})"
