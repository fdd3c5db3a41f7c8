"""The privacy-utility figure drawn and written (fedbench.report.privacy_utility says what it
shows): panels side by side at the page's width or stacked at a column's, one legend under
them, PNG + PDF + caption file (fedbench.report.style) and the points as CSV; and what
`fedbench plot` takes for it (table folders, --width)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fedbench.errors import FedbenchError
from fedbench.files import write_file
from fedbench.report.privacy_utility import (
    AXIS_LABELS,
    DODGE,
    MARKERS,
    MAX_TICKS,
    Figure,
    build,
    caption,
)
from fedbench.report.sources import Source, check_shared_setting
from fedbench.report.style import (
    WIDTHS,
    Width,
    paper_style,
    plain_number,
    plain_ticks,
    pyplot,
    save,
)


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
