"""curves.png: train loss and test accuracy per round, mean over seeds with a ±1 std band per
method, one column of panels per setting (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from fedbench.report.tables import setting_label


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
                data = sub[sub["method"] == method].dropna(subset=[metric])
                if data.empty:
                    continue
                stats = data.groupby("round")[metric].agg(["mean", "std"]).fillna(0.0)
                color = colors[i % len(colors)]
                ax.plot(stats.index, stats["mean"], label=method, color=color, lw=1.5)
                ax.fill_between(
                    stats.index,
                    stats["mean"] - stats["std"],
                    stats["mean"] + stats["std"],
                    color=color,
                    alpha=0.2,
                    lw=0,
                )
            if row == 0:
                ax.set_title(setting_label(json.loads(setting)), fontsize=10)
            if row == len(metrics) - 1:
                ax.set_xlabel("round")
            if col == 0:
                ax.set_ylabel(label)
            if metric == "train_loss":
                ax.set_yscale("log")
            ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="center right", fontsize=9, frameon=False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=(0, 0, 1 - 1.4 / fig.get_figwidth(), 0.95))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
