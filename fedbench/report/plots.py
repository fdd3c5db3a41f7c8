"""curves.png: train loss and test accuracy per round, mean over seeds with a ±1 std band per
method, one column of panels per setting titled by what ran in it; what ran, the seeds and
each private row's epsilon go to the caption (curves.caption.txt and the files' metadata), not
into the plot area. Also `fedbench plot RUN...`: the curves of any run folders overlaid. The
look (sizes, fonts, plain ticks) is fedbench.report.style's."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from fedbench.report.style import WIDTHS, paper_style, plain_ticks, pyplot, save

if TYPE_CHECKING:
    from collections.abc import Iterable

    from matplotlib.artist import Artist
    from matplotlib.axes import Axes

    from fedbench.report.tables import View

CURVE_METRICS = [("train_loss", "train loss"), ("test_acc", "test accuracy (%)")]
LOG_SCALE = {"train_loss", "test_loss"}
#: Inches per row of panels, and the most panels a page's width holds side by side (wider
#: figures grow by PANEL_IN a panel).
ROW_IN = 1.75
PAGE_PANELS = 4
PANEL_IN = 1.7
#: Characters per line of a panel title at 9 pt in a panel of about 1.7 in.
TITLE_CHARS = 30


def _plot_method(ax: Axes, runs: pd.DataFrame, metric: str, color: str, label: str) -> None:
    """One method's mean over seeds per round with a +-1 std band (nothing without data)."""
    data = runs.dropna(subset=[metric])
    if data.empty:
        return
    stats = data.groupby("round")[metric].agg(["mean", "std"]).fillna(0.0)
    ax.plot(stats.index, stats["mean"], label=label, color=color)
    ax.fill_between(
        stats.index,
        stats["mean"] - stats["std"],
        stats["mean"] + stats["std"],
        color=color,
        alpha=0.2,
        lw=0,
    )


def _legend_entries(axes: Iterable[Axes]) -> tuple[list[Artist], list[str]]:
    """Every method drawn in any panel, once, in order of first appearance."""
    handles: list[Artist] = []
    labels: list[str] = []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    return handles, labels


def curves_caption(view: View, methods: list[str]) -> str:
    """The caption of curves.png: what is drawn, what ran, and each private row's privacy
    (its epsilon, delta and accounting status: the legend names the rows only)."""
    private = [view.method_labels[m] for m in methods if view.method_labels.get(m, m) != m]
    text = (
        "Train loss and test accuracy per round: mean over seeds, band ±1 sample std. "
        f"What ran: {view.ran}. {view.details}."
    )
    for name, line in view.ran_lines()[1:]:
        text += f" {name}: {line}."
    if private:
        text += f" Privacy: {'; '.join(private)}."
    return text


def plot_curves(
    curves: pd.DataFrame,
    path: Path,
    view: View,
    column_titles: dict[str, str],
    methods: list[str],
) -> list[Path]:
    """Write curves.png, curves.pdf and curves.caption.txt; [] (nothing written) when no run
    has evaluations yet."""
    if curves.empty:
        return []
    present = [m for m in methods if m in set(curves["method"])]
    with paper_style() as plt:
        fig = draw_curves(curves, column_titles, present)
        files = save(fig, path, curves_caption(view, present), view.title)
        plt.close(fig)
    return files


def draw_curves(curves: pd.DataFrame, column_titles: dict[str, str], methods: list[str]) -> Any:
    """The figure of curves.png: a row of panels per metric, a column per setting (titled
    by what ran in it, where there are several), one legend under them naming the rows. One
    setting: a column's width; more: the page's."""
    settings = list(dict.fromkeys(curves["setting"]))
    if len(settings) == 1:
        width = WIDTHS["column"]
    else:
        width = max(WIDTHS["page"], PANEL_IN * len(settings))
    plt = pyplot()
    fig, axes = plt.subplots(
        len(CURVE_METRICS),
        len(settings),
        figsize=(width, ROW_IN * len(CURVE_METRICS) + 0.45),
        squeeze=False,
        sharex="col",
        layout="constrained",
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for col, setting in enumerate(settings):
        sub = curves[curves["setting"] == setting]
        for row, (metric, label) in enumerate(CURVE_METRICS):
            ax = axes[row][col]
            for i, method in enumerate(methods):
                color = colors[i % len(colors)]
                _plot_method(ax, sub[sub["method"] == method], metric, color, method)
            if row == 0 and len(settings) > 1:
                ax.set_title(textwrap.fill(column_titles.get(setting, setting), TITLE_CHARS))
            _style(ax, metric, label, row == len(CURVE_METRICS) - 1, col == 0)
    handles, entries = _legend_entries(axes.flat)
    fig.legend(handles, entries, loc="outside lower center", ncol=min(len(entries), 4))
    return fig


def _style(ax: Any, metric: str, label: str, bottom: bool, left: bool) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))  # no round 2.5
    if bottom:
        ax.set_xlabel("round")
    if left:
        ax.set_ylabel(label)
    if metric in LOG_SCALE:
        ax.set_yscale("log")
    plain_ticks(ax, "y")
    plain_ticks(ax, "x")


def plot_runs(series: dict[str, pd.DataFrame], metric: str, path: Path, title: str) -> list[Path]:
    """`fedbench plot RUN...`: one line per run (label -> its metrics.jsonl rows), metric vs
    round, at the page's width, the legend under the axes (labels name the settings that tell
    the runs apart); the title goes to the caption file and the metadata."""
    with paper_style() as plt:
        rows = max(1, (len(series) + 1) // 2)
        fig, ax = plt.subplots(figsize=(WIDTHS["page"], 2.6 + 0.16 * rows), layout="constrained")
        for name, data in series.items():
            data = data.dropna(subset=[metric])
            marker = "." if len(data) < 30 else None
            ax.plot(data["round"], data[metric], label=textwrap.fill(name, 60), marker=marker)
        _style(ax, metric, metric.replace("_", " "), True, True)
        fig.legend(loc="outside lower center", ncol=2 if len(series) > 1 else 1)
        caption = f"{title}: each run's evaluations as its metrics.jsonl records them."
        files = save(fig, path, caption, title)
        plt.close(fig)
    return files


def plot_run_curves(runs: list[str], metric: str, path: Path, runs_root: Path) -> list[Path]:
    """`fedbench plot RUN...`: RUNS (folders, or run ids under RUNS_ROOT) overlaid into the PNG
    at PATH (and its PDF and caption), titled by the fields that tell them apart."""
    from fedbench.report.runs import check_metric, read_curves

    series, keys = read_curves(runs, runs_root)
    check_metric(series, metric)
    title = f"{metric} per round" + (f"; runs differ in {', '.join(keys)}" if keys else "")
    return plot_runs(series, metric, path, title)
