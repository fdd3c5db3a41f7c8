"""The privacy-utility figure: a metric against the privacy budget ε, one line per private row
(mean over seeds with its 95 % confidence interval), the rows without differential privacy as
horizontal reference lines, from one table folder or several.

A point is a cell of a table: its ε is the privacy the cell spent (the largest over its seeds:
fedbench.report.privacy_cells), its value the mean over the cell's completed seeds, its bar the
95 % Student t interval of that mean (summary.csv's ci95_low / ci95_high). The table's grid keys
other than `privacy.*` (a dataset, a partition) make one panel each. Several folders are merged
when they share a setting: every field that is the same in all runs of one folder must be the
same in the others (what the rows and the privacy budgets change is left aside), so that a
non-private reference trained apart sits beside the private rows it is the reference of. Rows
are labelled by their name, and where two folders have a row of the same name, by the settings
that tell them apart.

δ, the accounting status and what ran go to the caption (`<stem>.caption.txt`, and the PNG's and
PDF's metadata); the plotted points to `<stem>.csv` (fedbench.report.privacy_plot draws and
writes them). The folders are read by fedbench.report.sources.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from fedbench.errors import FedbenchError
from fedbench.report.ran import value_label
from fedbench.report.sources import Source, row_labels

#: The y axis per metric.
AXIS_LABELS = {
    "test_acc": "test accuracy (%)",
    "best_test_acc": "best test accuracy (%)",
    "train_loss": "train loss",
    "test_loss": "test loss",
}
#: Points of different rows at the same ε are offset sideways by up to this factor (log axis)
#: so that their intervals do not hide one another; the caption says so.
DODGE = 0.025
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">")
#: Above this many distinct budgets the ticks are matplotlib's, not one per budget.
MAX_TICKS = 8


@dataclass
class Point:
    """One cell drawn: its row's label, panel, the ε it spent (NaN: a reference without DP),
    the mean over its seeds with the 95 % interval of that mean, and its seed count."""

    row: str
    panel: str
    epsilon: float
    mean: float
    low: float
    high: float
    n: int
    #: The config fields the point's runs fix: its grid values, and for a reference also the
    #: fields every run of its folder shares (which panels it is the reference of).
    where: dict[str, Any] = field(default_factory=dict)
    #: A reference's panels: those whose grid values it ran at.
    shown_in: list[str] = field(default_factory=list)


@dataclass
class Figure:
    """What the figure draws: per panel, each private row's points and the references."""

    metric: str
    panels: list[str]
    rows: list[str]
    points: list[Point]
    references: list[Point]
    deltas: list[str]
    accounting: list[str]
    what_ran: list[str] = field(default_factory=list)

    def table(self) -> pd.DataFrame:
        """The plotted points as `<stem>.csv` holds them (epsilon empty for a reference)."""
        records = [
            {
                "row": p.row,
                "private": private,
                "panel": p.panel,
                "epsilon": p.epsilon,
                "mean": p.mean,
                "ci95_low": p.low,
                "ci95_high": p.high,
                "n": p.n,
            }
            for private, points in ((True, self.points), (False, self.references))
            for p in points
        ]
        return pd.DataFrame.from_records(records)


def _panel_setting(setting: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in setting.items() if not k.startswith("privacy")}


def _ran_at(where: dict[str, Any], panel: dict[str, Any]) -> bool:
    """Whether a reference that fixed `where` ran at a panel's grid values."""
    same = (json.dumps(where.get(k)) == json.dumps(v) for k, v in panel.items())
    return all(k in where for k in panel) and all(same)


def _panel(setting: dict[str, Any]) -> str:
    """A panel by the grid values that are not privacy budgets: 'digits / Dir-0.1'; '' for
    a table whose only grid key is a budget."""
    keys = [k for k in setting if not k.startswith("privacy")]
    return " / ".join(value_label(k, setting[k]) for k in keys)


def build(sources: list[Source], metric: str) -> Figure:
    """The figure's points from the folders' summaries (FedbenchError when no cell is private)."""
    labels = row_labels(sources)
    points: list[Point] = []
    references: list[Point] = []
    deltas: dict[str, None] = {}
    accounting: dict[str, list[str]] = {}
    panel_settings: dict[str, dict[str, Any]] = {}
    for i, source in enumerate(sources):
        summary = source.summary
        if summary.empty:
            continue
        constant = source.constant()
        cells = summary[(summary["metric"] == metric) & (summary["n"] > 0)]
        for _, cell in cells.iterrows():
            setting = json.loads(cell["setting_json"])
            row = labels[(i, cell["method"])]
            point = Point(
                row,
                _panel(setting),
                float(cell["epsilon"]),
                float(cell["mean"]),
                float(cell["ci95_low"]),
                float(cell["ci95_high"]),
                int(cell["n"]),
                _panel_setting(setting),
            )
            if math.isnan(point.epsilon):
                point.where = {**constant, **point.where}
                references.append(point)
                continue
            panel_settings.setdefault(point.panel, point.where)
            points.append(point)
            deltas[_delta_text(cell["delta"])] = None
        _statuses(source.runs, {m: labels[(i, m)] for m in source.table.methods}, accounting)
    if not points:
        folders = ", ".join(str(s.folder) for s in sources)
        raise FedbenchError(
            f"no private cell with a completed run of {metric} in {folders}: the privacy-utility "
            "figure needs rows with differential privacy (a `privacy:` section); to overlay "
            "curves, give run folders"
        )
    panels = list(dict.fromkeys(p.panel for p in points))
    _place(references, panel_settings)
    rows = list(dict.fromkeys(p.row for p in points))
    status = _accounting_text(accounting, len(rows))
    return Figure(
        metric,
        panels,
        rows,
        points,
        references,
        list(deltas),
        status,
        [s.what_ran() for s in sources],
    )


def _statuses(runs: pd.DataFrame, labels: dict[str, str], into: dict[str, list[str]]) -> None:
    """Each accounting status (with the engine's reason) of a folder's private runs -> the
    rows (their figure labels) it applies to."""
    private = runs[(runs["status"] == "completed") & runs["epsilon"].notna()]
    for method, status, why in zip(
        private["method"], private["accounting"], private["accounting_why"], strict=True
    ):
        if status:
            rows = into.setdefault(f"{status} ({why})" if why else status, [])
            if labels.get(method, method) not in rows:
                rows.append(labels.get(method, method))


def _place(references: list[Point], panel_settings: dict[str, dict[str, Any]]) -> None:
    """Each reference in the panels whose grid values it ran at (a non-private table without
    a grid, at Dir-0.6, is the reference of the Dir-0.6 panel only); one that ran in none is a
    one-line error."""
    for ref in references:
        ref.shown_in = [p for p, where in panel_settings.items() if _ran_at(ref.where, where)]
        if not ref.shown_in:
            ran = ref.panel or "its own setting"
            panels = ", ".join(p or "one setting" for p in panel_settings)
            raise FedbenchError(
                f"the reference row {ref.row!r} ran in {ran}, where no private row ran (private "
                f"rows: {panels}); plot folders of the same setting"
            )


def _delta_text(delta: Any) -> str:
    return f"{delta:g}" if isinstance(delta, float) else str(delta)


def _accounting_text(by_status: dict[str, list[str]], rows: int) -> list[str]:
    """'exact (Poisson batch sampling ...)' when every row shares it, else one entry per status
    naming its rows."""
    if len(by_status) == 1 and len(next(iter(by_status.values()))) == rows:
        return list(by_status)
    return [f"{status}: {', '.join(names)}" for status, names in by_status.items()]


def caption(figure: Figure, sources: list[Source]) -> str:
    """The figure's caption: what is drawn, how, δ and the accounting, and what ran."""
    seeds = sorted({p.n for p in [*figure.points, *figure.references]})
    seed_text = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}"
    metric = AXIS_LABELS.get(figure.metric, figure.metric)
    text = (
        f"{metric[0].upper()}{metric[1:]} against the privacy budget ε per method: mean over "
        f"{seed_text} seeds with its 95% confidence interval (Student t). ε is the privacy a "
        "cell spent, the largest over its seeds (each run's worst client); points at the same ε "
        f"are offset sideways by up to {DODGE * 100:g}% for legibility."
    )
    refs = list(dict.fromkeys(r.row for r in figure.references))
    if refs:
        text += (
            f" Dashed: {', '.join(refs)} without differential privacy (mean; band: its 95% "
            "interval)."
        )
    text += f" δ = {' or '.join(figure.deltas)}; accounting: {'; '.join(figure.accounting)}."
    for source, ran in zip(sources, figure.what_ran, strict=True):
        name = f" ({source.folder.name})" if len(sources) > 1 else ""
        text += f" What ran{name}: {ran}."
    return text


def has_budgets(summary: pd.DataFrame) -> bool:
    """Whether a report's summary holds a private row at two budgets or more in one panel:
    the report then draws its privacy-utility figure."""
    if summary.empty or "epsilon" not in summary:
        return False
    private = summary[summary["epsilon"].notna() & (summary["n"] > 0)]
    panels = [_panel(json.loads(s)) for s in private["setting_json"]]
    counts = private.assign(panel=panels).groupby(["method", "panel"])["epsilon"].nunique()
    return bool((counts >= 2).any())
