"""curves.png: train loss and test accuracy per round, mean over seeds with a ±1 std band per
method, one column of panels per setting titled by what ran in it, and the what-ran sentence
under the title (matplotlib, Agg backend: no display needed). Also `fedbench plot`: the curves
of any run folders overlaid."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from fedbench.files import save_figure

if TYPE_CHECKING:
    from collections.abc import Iterable

    from matplotlib.artist import Artist
    from matplotlib.axes import Axes

    from fedbench.report.tables import View

CURVE_METRICS = [("train_loss", "train loss"), ("test_acc", "test accuracy (%)")]
LOG_SCALE = {"train_loss", "test_loss"}
#: Characters per line of a legend entry.
LEGEND_CHARS = 24


def _plot_method(
    ax: Axes, runs: pd.DataFrame, metric: str, color: str, labels: dict[str, str]
) -> None:
    """One method's mean over seeds per round with a +-1 std band (nothing without data),
    labelled `labels[method]` (a private row's says its epsilon) or by the method."""
    data = runs.dropna(subset=[metric])
    if data.empty:
        return
    stats = data.groupby("round")[metric].agg(["mean", "std"]).fillna(0.0)
    method = str(data["method"].iloc[0])
    ax.plot(stats.index, stats["mean"], label=labels.get(method, method), color=color, lw=1.5)
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


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_curves(
    curves: pd.DataFrame,
    path: Path,
    view: View,
    column_titles: dict[str, str],
    methods: list[str],
) -> bool:
    """Write the figure; False (nothing written) when no run has evaluations yet."""
    if curves.empty:
        return False
    plt = _pyplot()
    settings = list(dict.fromkeys(curves["setting"]))
    # Legend entries wrapped (a private row's says its epsilon), and room for the widest line.
    labels = {m: textwrap.fill(view.method_labels.get(m, m), LEGEND_CHARS) for m in methods}
    widest = max((len(x) for v in labels.values() for x in v.split("\n")), default=0)
    legend_in = max(1.4, 0.7 + 0.075 * widest)  # the line sample, then ~0.075 in a character
    fig, axes = plt.subplots(
        len(CURVE_METRICS),
        len(settings),
        figsize=(4.2 * len(settings) + legend_in + 0.1, 3.2 * len(CURVE_METRICS) + 0.6),
        squeeze=False,
        sharex="col",
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    present = [m for m in methods if m in set(curves["method"])]
    for col, setting in enumerate(settings):
        sub = curves[curves["setting"] == setting]
        for row, (metric, label) in enumerate(CURVE_METRICS):
            ax = axes[row][col]
            for i, method in enumerate(present):
                color = colors[i % len(colors)]
                _plot_method(ax, sub[sub["method"] == method], metric, color, labels)
            if row == 0:
                ax.set_title(column_titles.get(setting, setting), fontsize=10)
            _style(ax, metric, label, row == len(CURVE_METRICS) - 1, col == 0)
    handles, entries = _legend_entries(axes.flat)
    fig.legend(handles, entries, loc="center right", fontsize=9, frameon=False)
    width = max(60, int(fig.get_figwidth() * 13))
    ran = textwrap.fill(f"what ran: {view.ran}. {view.details}.", width)
    fig.suptitle(f"{view.title}\n{ran}", fontsize=9)
    top = 1 - (0.35 + 0.16 * ran.count("\n")) / fig.get_figheight()
    fig.tight_layout(rect=(0, 0, 1 - legend_in / fig.get_figwidth(), top))
    _save(fig, path)
    plt.close(fig)
    return True


def _style(ax: Any, metric: str, label: str, bottom: bool, left: bool) -> None:
    if bottom:
        ax.set_xlabel("round")
    if left:
        ax.set_ylabel(label)
    if metric in LOG_SCALE:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)


def _save(fig: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=110)


def plot_runs(series: dict[str, pd.DataFrame], metric: str, path: Path, title: str) -> None:
    """`fedbench plot`: one line per run (label -> its metrics.jsonl rows), metric vs round,
    the legend under the axes (labels name the settings that tell the runs apart)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for name, rows in series.items():
        data = rows.dropna(subset=[metric])
        marker = "." if len(data) < 30 else None
        ax.plot(data["round"], data[metric], label=textwrap.fill(name, 100), lw=1.5, marker=marker)
    _style(ax, metric, metric.replace("_", " "), True, True)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(0.0, -0.14))
    ax.set_title(textwrap.fill(title, 90), fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")  # "tight": room for the legend below
    plt.close(fig)


def plot_run_curves(runs: list[str], metric: str, path: Path, runs_root: Path) -> None:
    """`fedbench plot`: RUNS (folders, or run ids under RUNS_ROOT) overlaid into the PNG at
    PATH, titled by the fields that tell them apart."""
    from fedbench.report.runs import check_metric, read_curves

    series, keys = read_curves(runs, runs_root)
    check_metric(series, metric)
    title = f"{metric} per round" + (f"; runs differ in {', '.join(keys)}" if keys else "")
    plot_runs(series, metric, path, title)
