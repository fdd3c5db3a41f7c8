"""The privacy a table's runs spent, as its report shows it: per run from summary.json (epsilon,
delta, noise_multiplier, privacy_accounting) and config.yaml (privacy.clip); per cell the
largest epsilon over its seeds (each seed's run is its own release: the cell guarantees no more
than its worst seed), with delta, sigma, clip and the accounting status as the run recorded
them. The status and its reason are the engine's words (`PrivacyPlan.accounting()`), quoted,
never re-worded here."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

#: summary.csv's privacy columns, per cell (empty for a row without differential privacy).
PRIVACY_COLUMNS = ("epsilon", "delta", "sigma", "clip", "accounting")
#: What an epsilon cell of a row without differential privacy says.
NO_DP = "no DP"


def run_privacy(summary: dict[str, Any] | None, cfg: dict[str, Any] | None) -> dict[str, Any]:
    """One run's privacy: epsilon, delta, sigma (the noise multiplier that ran), clip,
    accounting (the status: exact, approximate, upper bound ...) and accounting_why; NaN and ''
    for a run without privacy or without a summary."""
    summary = summary or {}
    epsilon = summary.get("epsilon")
    if epsilon is None:
        return {
            "epsilon": math.nan,
            "delta": math.nan,
            "sigma": math.nan,
            "clip": math.nan,
            "accounting": "",
            "accounting_why": "",
        }
    accounting = summary.get("privacy_accounting") or {}
    clip = ((cfg or {}).get("privacy") or {}).get("clip")
    return {
        "epsilon": float(epsilon),
        "delta": _float(summary.get("delta")),
        "sigma": _float(summary.get("noise_multiplier")),
        "clip": _float(clip),
        "accounting": str(accounting.get("accounting", "")),
        "accounting_why": str(accounting.get("why", "")),
    }


def _float(value: Any) -> float:
    return math.nan if value is None else float(value)


def cell_privacy(cell: pd.DataFrame) -> dict[str, Any]:
    """A cell's privacy columns from its completed runs: the largest epsilon over the seeds, and
    delta, sigma, clip and accounting (the seeds' values, ' / '-joined where they differ)."""
    done = cell[(cell["status"] == "completed") & cell["epsilon"].notna()]
    if done.empty:
        return {key: (math.nan if key != "accounting" else "") for key in PRIVACY_COLUMNS}
    out: dict[str, Any] = {"epsilon": float(done["epsilon"].max())}
    for key in ("delta", "sigma", "clip"):
        values = list(dict.fromkeys(v for v in done[key] if not math.isnan(v)))
        out[key] = values[0] if len(values) == 1 else " / ".join(f"{v:g}" for v in values)
    out["accounting"] = " / ".join(dict.fromkeys(str(v) for v in done["accounting"] if v))
    return out


def epsilon_text(privacy: dict[str, Any]) -> str:
    """An epsilon cell: '3.12 (δ 1e-05, exact)'."""
    delta = privacy["delta"]
    shown = f"{delta:g}" if isinstance(delta, float) else str(delta)
    status = f", {privacy['accounting']}" if privacy["accounting"] else ""
    return f"{privacy['epsilon']:.2f} (δ {shown}{status})"


def private_rows(runs: pd.DataFrame) -> bool:
    return bool(len(runs)) and bool(runs["epsilon"].notna().any())


def legend_lines(runs: pd.DataFrame) -> list[str]:
    """The legend of a table with private rows: what its epsilon is, and each accounting status
    with the engine's reason for it, naming the rows it applies to."""
    if not private_rows(runs):
        return []
    lines = [
        "ε: the privacy a run spent (its worst client, by the run's accountant) at δ, the "
        "largest over the cell's seeds; the accounting status says how it relates to the "
        f"mechanism that ran; {NO_DP}: a row without differential privacy"
    ]
    done = runs[(runs["status"] == "completed") & runs["epsilon"].notna()]
    by_reason: dict[tuple[str, str], list[str]] = {}
    for method, status, why in zip(
        done["method"], done["accounting"], done["accounting_why"], strict=True
    ):
        if status:
            rows = by_reason.setdefault((status, why), [])
            if method not in rows:
                rows.append(method)
    for (status, why), methods in by_reason.items():
        lines.append(f"accounting of {', '.join(methods)}: {status} ({why})")
    return lines


def method_labels(runs: pd.DataFrame, methods: list[str]) -> dict[str, str]:
    """Each row's privacy in curves.png's caption: 'DP-FedAvg (ε 3.12, δ 1e-05, exact)'; the
    range of epsilon over the columns where they differ ('ε 3.12-8.40'); the row's name alone
    without privacy."""
    if not private_rows(runs):
        return {method: method for method in methods}
    labels = {}
    for method in methods:
        mine = runs[
            (runs["method"] == method) & (runs["status"] == "completed") & runs["epsilon"].notna()
        ]
        if mine.empty:
            labels[method] = method
            continue
        worst = mine.groupby("setting")["epsilon"].max()
        low, high = float(worst.min()), float(worst.max())
        eps = f"{high:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f}"
        deltas = " / ".join(f"{d:g}" for d in dict.fromkeys(mine["delta"]))
        status = " / ".join(dict.fromkeys(s for s in mine["accounting"] if s))
        labels[method] = f"{method} (ε {eps}, δ {deltas}" + (f", {status})" if status else ")")
    return labels


def privacy_note(runs: pd.DataFrame) -> str:
    """table.tex's footnote of a table with private rows, in one sentence: what ε is, δ once,
    and the accounting status with the engine's reason (naming the rows where they differ):
    'ε: the privacy a cell spent (each run's worst client, by its accountant), the largest over
    the cell's seeds, at δ = 1e-05; accounting: exact (Poisson batch sampling ...)'; '' without
    DP."""
    if not private_rows(runs):
        return ""
    done = runs[(runs["status"] == "completed") & runs["epsilon"].notna()]
    deltas = " or ".join(dict.fromkeys(f"{d:g}" for d in done["delta"] if not math.isnan(d)))
    by_status: dict[str, list[str]] = {}
    for method, status, why in zip(
        done["method"], done["accounting"], done["accounting_why"], strict=True
    ):
        if status:
            rows = by_status.setdefault(f"{status} ({why})" if why else status, [])
            if method not in rows:
                rows.append(method)
    every = list(dict.fromkeys(done["method"]))
    if len(by_status) == 1 and next(iter(by_status.values())) == every:
        status = f"accounting: {next(iter(by_status))}"
    else:
        status = "; ".join(f"accounting of {', '.join(m)}: {s}" for s, m in by_status.items())
    text = (
        "ε: the privacy a cell spent (each run's worst client, by its accountant), the largest "
        f"over the cell's seeds, at δ = {deltas or '?'}"
    )
    plain = (runs["status"] == "completed") & runs["epsilon"].isna()
    return (
        text
        + (f"; {status}" if status else "")
        + (f"; {NO_DP}: a row without DP" if plain.any() else "")
    )
