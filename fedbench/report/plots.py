"""curves.png: train loss and test accuracy per round, mean over seeds with a ±1 std band per
method, one column of panels per setting (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from fedbench.report.tables import setting_label

if TYPE_CHECKING:
    from collections.abc import Iterable

    from matplotlib.artist import Artist
    from matplotlib.axes import Axes


def _plot_method(ax: Axes, runs: pd.DataFrame, metric: str, color: str) -> None:
    """One method's mean over seeds per round with a +-1 std band (nothing without data)."""
    data = runs.dropna(subset=[metric])
    if data.empty:
        return
    stats = data.groupby("round")[metric].agg(["mean", "std"]).fillna(0.0)
    method = str(data["method"].iloc[0])
    ax.plot(stats.index, stats["mean"], label=method, color=color, lw=1.5)
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


def plot_curves(curves: pd.DataFrame, path: Path, title: str, methods: list[str]) -> bool:
    """Write the figure; False (nothing written) when no run has evaluations yet."""
    if curves.empty:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    settings = list(dict.fromkeys(curves["setting"]))
    metrics = [("train_loss", "train loss"), ("test_acc", "test accuracy (%)")]
    fig, axes = plt.subplots(
        len(metrics),
        len(settings),
        figsize=(4.2 * len(settings) + 1.5, 3.2 * len(metrics)),
        squeeze=False,
        sharex="col",
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    present = [m for m in methods if m in set(curves["method"])]
    for col, setting in enumerate(settings):
        sub = curves[curves["setting"] == setting]
        for row, (metric, label) in enumerate(metrics):
            ax = axes[row][col]
            for i, method in enumerate(present):
                _plot_method(ax, sub[sub["method"] == method], metric, colors[i % len(colors)])
            if row == 0:
                ax.set_title(setting_label(json.loads(setting)), fontsize=10)
            if row == len(metrics) - 1:
                ax.set_xlabel("round")
            if col == 0:
                ax.set_ylabel(label)
            if metric == "train_loss":
                ax.set_yscale("log")
            ax.grid(alpha=0.3)
    handles, labels = _legend_entries(axes.flat)
    fig.legend(handles, labels, loc="center right", fontsize=9, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1 - 1.4 / fig.get_figwidth(), 0.95))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
