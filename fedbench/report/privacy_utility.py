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
PDF's metadata); the plotted points to `<stem>.csv`. The look is fedbench.report.style's.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fedbench.errors import FedbenchError
from fedbench.files import write_file
from fedbench.report.collect import collect, plan_table, read_plan, run_configs, with_metrics
from fedbench.report.ran import IGNORED_PREFIXES, Cfg, describe, facts, flatten, value_label
from fedbench.report.runs import distinguishing, label
from fedbench.report.style import (
    WIDTHS,
    Width,
    paper_style,
    plain_number,
    plain_ticks,
    pyplot,
    save,
)
from fedbench.report.tables import summarise
from fedbench.runner.table_config import TableConfig

#: The y axis per metric.
AXIS_LABELS = {
    "test_acc": "test accuracy (%)",
    "best_test_acc": "best test accuracy (%)",
    "train_loss": "train loss",
    "test_loss": "test loss",
}
#: Fields that change with the row or with the privacy budget: never part of the setting two
#: folders must share (nor of a panel).
ROW_PREFIXES = ("algorithm.", "privacy", "seed")
#: Points of different rows at the same ε are offset sideways by up to this factor (log axis)
#: so that their intervals do not hide one another; the caption says so.
DODGE = 0.025
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">")
#: Above this many distinct budgets the ticks are matplotlib's, not one per budget.
MAX_TICKS = 8


@dataclass
class Source:
    """One table folder as the figure reads it: its plan, table, per-cell summary (the
    report's, with the figure's metric) and its runs' resolved configs by run id."""

    folder: Path
    plan: dict[str, Any]
    table: TableConfig
    summary: pd.DataFrame
    runs: pd.DataFrame
    configs: dict[str, Cfg]

    @classmethod
    def read(cls, folder: Path, metric: str, runs_root: Path | None = None) -> Source:
        """The folder's runs under RUNS_ROOT (default: its sibling runs/ folder)."""
        plan = read_plan(folder)
        table = with_metrics(plan_table(plan), [metric])
        runs_root = runs_root or folder.parent / "runs"
        runs, _ = collect(folder, runs_root, table)
        summary = summarise(runs, table, ci=True)
        configs = run_configs(plan, runs_root)
        return cls(folder, plan, table, summary, runs, configs)

    def row_configs(self, method: str) -> list[Cfg]:
        runs = self.plan["runs"]
        return [
            self.configs[r["run_id"]]
            for r in runs
            if r["method"] == method and r["run_id"] in self.configs
        ]

    def constant(self) -> dict[str, Any]:
        """The fields every run of this folder shares (row and privacy fields left aside)."""
        flat = [flatten(c) for c in self.configs.values()]
        if not flat:
            return {}
        keys = set.intersection(*(set(f) for f in flat))
        out = {}
        for key in sorted(keys):
            if key.startswith(IGNORED_PREFIXES) or key.startswith(ROW_PREFIXES):
                continue
            values = {json.dumps(f[key], sort_keys=True) for f in flat}
            if len(values) == 1:
                out[key] = flat[0][key]
        return out

    def what_ran(self) -> str:
        by_column: dict[str, list[Cfg]] = {}
        for run in self.plan["runs"]:
            if run["run_id"] in self.configs:
                by_column.setdefault(json.dumps(run["setting"]), []).append(
                    self.configs[run["run_id"]]
                )
        text = describe(facts(by_column)) if by_column else "nothing has run yet"
        overrides = self.plan.get("overrides") or []
        preset = self.plan.get("preset")
        extra = [f"preset {preset}"] if preset else []
        extra += [f"--set {', '.join(overrides)}"] if overrides else []
        return text + (f" ({'; '.join(extra)})" if extra else "")


@dataclass
class Point:
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


def check_shared_setting(sources: list[Source]) -> None:
    """Folders plotted together must share their setting (ROW_PREFIXES aside): a one-line
    error names the first field that differs."""
    first = sources[0].constant()
    for other in sources[1:]:
        theirs = other.constant()
        for key in first:
            if key in theirs and json.dumps(first[key]) != json.dumps(theirs[key]):
                raise FedbenchError(
                    f"{sources[0].folder} and {other.folder} do not share a setting: {key} is "
                    f"{first[key]!r} in one and {theirs[key]!r} in the other; plot them apart"
                )


def row_labels(sources: list[Source]) -> dict[tuple[int, str], str]:
    """(source index, row) -> its label, for every planned row: the row's name, and where two
    folders have a row of that name, the settings that tell them apart ('DP-FedAvg,
    lr=0.05'), else the folder."""
    names: dict[str, list[tuple[int, str]]] = {}
    for i, source in enumerate(sources):
        for method in dict.fromkeys(run["method"] for run in source.plan["runs"]):
            names.setdefault(method, []).append((i, method))
    out: dict[tuple[int, str], str] = {}
    for name, rows in names.items():
        if len(rows) == 1:
            out[rows[0]] = name
            continue
        cfgs = [(sources[i].row_configs(m) or [{}])[0] for i, m in rows]
        keys = [k for k in distinguishing(cfgs) if not k.startswith(("privacy", "seed"))]
        for (i, m), cfg in zip(rows, cfgs, strict=True):
            told = label(flatten(cfg), keys) if keys else ""
            out[(i, m)] = f"{name}, {told}" if told else f"{name} ({sources[i].folder})"
    return out


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


def draw(figure: Figure, width: Width) -> Any:
    """The matplotlib figure: one panel per setting, side by side at the page's width,
    stacked at a column's, and one legend under them."""
    count = len(figure.panels)
    across = width == "page"
    size = (WIDTHS["page"], 2.5) if across else (WIDTHS["column"], 0.45 + 2.1 * count)
    plt = pyplot()
    fig, axes = plt.subplots(
        1 if across else count,
        count if across else 1,
        figsize=size,
        squeeze=False,
        layout="constrained",
    )
    for ax, panel in zip(axes.flat, figure.panels, strict=True):
        _draw_panel(ax, figure, panel, plt.rcParams["axes.prop_cycle"].by_key()["color"])
        if panel and count > 1:
            ax.set_title(panel)
    for ax in axes[:, 0] if across else axes.flat:
        ax.set_ylabel(AXIS_LABELS.get(figure.metric, figure.metric))
    handles, labels = [], []  # every entry of any panel, once (a reference may sit in one)
    for ax in axes.flat:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            if text not in labels:
                handles.append(handle)
                labels.append(text)
    # The private rows first, in table order, then the references (drawn last in the legend).
    order = sorted(range(len(labels)), key=lambda k: labels[k].endswith("(no DP)"))
    handles, labels = [handles[k] for k in order], [labels[k] for k in order]
    columns = min(len(labels), 4 if across else 2)
    fig.legend(handles, labels, loc="outside lower center", ncol=columns)
    return fig


def _draw_panel(ax: Any, figure: Figure, panel: str, colors: list[str]) -> None:
    """One panel: each private row's points with their intervals (offset sideways by DODGE),
    the references that ran at its grid values, and ticks at the budgets spent."""
    import numpy as np

    epsilons = sorted({p.epsilon for p in figure.points})
    log = epsilons[0] > 0 and epsilons[-1] / epsilons[0] >= 3
    for i, row in enumerate(figure.rows):
        mine = sorted(
            (p for p in figure.points if p.row == row and p.panel == panel),
            key=lambda p: p.epsilon,
        )
        if not mine:
            continue
        shift = (i - (len(figure.rows) - 1) / 2) * DODGE
        x = np.array([p.epsilon for p in mine])
        x = x * (1 + shift) if log else x + shift * (epsilons[-1] - epsilons[0] or 1)
        low = [p.mean - p.low if p.n > 1 else 0.0 for p in mine]
        high = [p.high - p.mean if p.n > 1 else 0.0 for p in mine]
        ax.errorbar(
            x,
            [p.mean for p in mine],
            yerr=np.vstack([low, high]),
            label=row,
            color=colors[i % len(colors)],
            marker=MARKERS[i % len(MARKERS)],
            capsize=2,
            elinewidth=0.8,
        )
    for j, ref in enumerate(r for r in figure.references if panel in r.shown_in):
        color = ("0.25", "0.55", "0.4")[j % 3]
        ax.axhline(ref.mean, color=color, ls="--", lw=1.0, label=f"{ref.row} (no DP)")
        if ref.n > 1:
            ax.axhspan(ref.low, ref.high, color=color, alpha=0.12, lw=0)
    if log:
        ax.set_xscale("log")
    ax.minorticks_off()
    if len(epsilons) <= MAX_TICKS:
        ax.set_xticks(epsilons, [plain_number(round(e, 2)) for e in epsilons])
    else:
        plain_ticks(ax, "x")
    plain_ticks(ax, "y")
    ax.set_xlabel("privacy budget ε")


def plot_privacy_utility(
    folders: list[Path],
    metric: str,
    path: Path,
    width: Width = "column",
    runs_root: Path | None = None,
) -> list[Path]:
    """Write the figure of FOLDERS (table folders, their runs under RUNS_ROOT, default each
    folder's sibling runs/) to PATH (PNG), its PDF, caption and CSV; return the paths written."""
    sources = [Source.read(folder, metric, runs_root) for folder in folders]
    check_shared_setting(sources)
    return write_figure(sources, metric, path, width)


def write_figure(sources: list[Source], metric: str, path: Path, width: Width) -> list[Path]:
    """plot_privacy_utility's files from sources already read (a report passes its own)."""
    figure = build(sources, metric)
    title = "Privacy-utility: " + " + ".join(s.table.title or s.table.table for s in sources)
    with paper_style() as plt:
        drawn = draw(figure, width)
        files = save(drawn, path, caption(figure, sources), title)
        plt.close(drawn)
    csv = path.with_suffix(".csv")
    write_file(csv, figure.table().to_csv(index=False))
    return [*files, csv]


def has_budgets(summary: pd.DataFrame) -> bool:
    """Whether a report's summary holds a private row at two budgets or more in one panel:
    the report then draws its privacy-utility figure."""
    if summary.empty or "epsilon" not in summary:
        return False
    private = summary[summary["epsilon"].notna() & (summary["n"] > 0)]
    panels = [_panel(json.loads(s)) for s in private["setting_json"]]
    counts = private.assign(panel=panels).groupby(["method", "panel"])["epsilon"].nunique()
    return bool((counts >= 2).any())


def parse_width(text: str) -> Width:
    """`fedbench plot --width`: column (3.3 in) or page (6.9 in); anything else is a one-line
    error."""
    if text == "column":
        return "column"
    if text == "page":
        return "page"
    raise FedbenchError(f"--width {text!r}: give column (3.3 in) or page (6.9 in)")


def table_folders(targets: list[str]) -> list[Path]:
    """`fedbench plot` TARGETS as table folders (each holds plan.json), or [] when none is
    one (run folders: their curves); a mix is a one-line error."""
    from fedbench.report.collect import PLAN_FILE

    tables = [Path(t) for t in targets if (Path(t) / PLAN_FILE).is_file()]
    if tables and len(tables) != len(targets):
        other = next(t for t in targets if not (Path(t) / PLAN_FILE).is_file())
        raise FedbenchError(
            f"{other} is not a table folder (no {PLAN_FILE}) while {tables[0]} is: give table "
            "folders (the privacy-utility figure) or run folders (their curves), not both"
        )
    return tables
