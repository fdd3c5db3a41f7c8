"""Rebuild a table folder's report from its plan and its runs' folders."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from rich.table import Table

from fedbench.report.collect import collect, plan_table, read_plan
from fedbench.report.plots import plot_curves
from fedbench.report.tables import layout, summarise, to_latex, to_markdown, to_rich

SUMMARY_COLUMNS = ("method", "metric", "mean", "std", "n", "paper_mean", "paper_std")


@dataclass
class Report:
    folder: Path
    summary: pd.DataFrame
    table: pd.DataFrame
    rich: Table
    files: list[Path]


def build_report(folder: Path, runs_root: Path | None = None) -> Report:
    """Write summary.csv, table.csv, table.md, table.tex and curves.png into `folder`."""
    plan = read_plan(folder)
    table = plan_table(plan)
    title = table.title or table.table
    if plan.get("preset"):
        title += f" [preset {plan['preset']}]"
    statistic = table.report if table.report != "last_k_mean" else f"mean of last {table.last_k}"
    title += f" ({statistic} evaluation)"
    runs, curves = collect(folder, runs_root)
    summary = summarise(runs, table)
    keys = list(table.grid)
    front = ["method", *keys, "metric", "mean", "std", "n", "paper_mean", "paper_std"]
    summary = summary[front + [c for c in summary.columns if c not in front]]
    wide, best = layout(summary, table)
    files = [folder / name for name in ("summary.csv", "table.csv", "table.md", "table.tex")]
    summary.drop(columns=["cell", "paper"]).to_csv(files[0], index=False)
    wide.to_csv(files[1], index=False)
    note = f"\n{table.note.strip()}\n" if table.note else ""  # the table config's `note:`
    files[2].write_text(to_markdown(wide, best, title) + note)
    files[3].write_text(to_latex(wide, best, title))
    if plot_curves(curves, folder / "curves.png", title, list(table.methods)):
        files.append(folder / "curves.png")
    rich = to_rich(wide, best, title)
    rich.caption = table.note.strip() or None
    return Report(folder, summary, wide, rich, files)
