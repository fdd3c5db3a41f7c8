"""FedAdamW (Liu et al., AAAI 2026), Figure 6: training-loss curves of Table 1's rows (CIFAR-100,
ResNet-18 and ViT-Tiny, Dir-0.6 and Dir-0.1). "FedAdamW converges the fastest."

The figure reads a Table 1 results folder (`fedbench run table1` writes OUT/table1): nothing is
retrained. With `run: true` (the `quick` preset) it first runs the table's sweep, which skips
finished runs and resumes interrupted ones like `fedbench run`. `TableFigure` is shared with
DP-FedAdamW's Figure 5 (fedbench/figures/dp_fig5.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from fedbench.figures.base import Claim, Figure, FigureContext, FigureData, FigureSettings
from fedbench.figures.registry import FIGURES
from fedbench.figures.stats import rank

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure as MplFigure


class TableFigureSettings(FigureSettings):
    """Which table folder to read. `folder`: an existing table folder (default
    OUT/<table>[-<table_preset>]); `run`: run (or resume) the table's sweep first, with
    `table_preset`, `seeds`, `methods` and `overrides` (`--set` items of `fedbench run`);
    `where`: keep the columns whose setting has these values (e.g. `{data.name: cifar100}`);
    `claimed`: the row the paper says is best."""

    table: str
    kind: Literal["table", "ablation"] = "table"
    folder: str | None = None
    run: bool = False
    table_preset: str | None = None
    seeds: int | None = Field(default=None, ge=1)
    methods: list[str] | None = None
    overrides: list[str] = Field(default_factory=list)
    where: dict[str, Any] = Field(default_factory=dict)
    claimed: str = "FedAdamW"


class Fig6Settings(TableFigureSettings):
    table: str = "table1"


class TableFigure(Figure):
    """A figure of a table folder's runs: `runs` (one row per finished run and its metrics)
    and `curves` (one row per run and evaluated round)."""

    smoke_settings: ClassVar[dict[str, Any]] = {"run": True}

    Settings = TableFigureSettings

    def table_folder(self, settings: Any, context: FigureContext) -> Path:
        from fedbench.errors import FedbenchError

        if settings.run:
            return context.sweep(
                settings.table,
                kind=settings.kind,
                preset=settings.table_preset,
                seeds=settings.seeds,
                methods=settings.methods,
                overrides=settings.overrides,
                where=settings.where,
            )
        name = f"{settings.table}-{settings.table_preset}" if settings.table_preset else None
        folder = (
            Path(settings.folder) if settings.folder else context.out / (name or settings.table)
        )
        if not (folder / "plan.json").is_file():
            command = "run" if settings.kind == "table" else "ablate"
            preset = f" --preset {settings.table_preset}" if settings.table_preset else ""
            raise FedbenchError(
                f"figure {self.name} reads a {settings.table} results folder but {folder} is not "
                f"one; run `fedbench {command} {settings.table}{preset} --out {context.out}` "
                "first, give one with --set folder=DIR, or --set run=true to run it here"
            )
        return folder

    def read(self, settings: Any, context: FigureContext) -> tuple[pd.DataFrame, pd.DataFrame, str]:
        """(runs, curves, folder name) of the finished runs in the columns `where` keeps, with a
        readable `column` label."""
        from fedbench.errors import FedbenchError
        from fedbench.report.collect import collect

        folder = self.table_folder(settings, context)
        runs, curves = collect(folder)
        runs = runs[runs["status"] == "completed"].copy()
        keep = [_matches(s, settings.where) for s in runs["setting"]]
        runs = runs[keep]
        if runs.empty:
            raise FedbenchError(
                f"{folder} has no finished run"
                + (f" in the columns {json.dumps(settings.where)}" if settings.where else "")
                + "; finish the table (rerun its command) or change --set where"
            )
        curves = curves.merge(runs[["method", "setting", "seed"]], on=["method", "setting", "seed"])
        for frame in (runs, curves):
            frame["column"] = [_label(s) for s in frame["setting"]]
        return runs.reset_index(drop=True), curves.reset_index(drop=True), folder.name

    def caption(self, data: FigureData, what: str, after: str = "") -> str:
        """The title over the table folder's name and `what` the marks show, over how many
        seeds (the most any row of a column has), then `after`."""
        seeds = data.table.groupby(["column", "method"])["seed"].nunique().max()
        return (
            f"{self.title}\n{data.extra.get('folder', '')}: columns as the table names them; "
            f"{what} over {seeds} seeds{after}"
        )


def in_table_order(table: pd.DataFrame) -> pd.DataFrame:
    """The rows grouped by column, stably: the table's row order within each column."""
    return table.sort_values("column", kind="stable").reset_index(drop=True)


def by_column(table: pd.DataFrame, value: str) -> dict[str, dict[str, list[float]]]:
    """column -> method -> the `value` of each of its rows (seeds), in the frame's order."""
    values: dict[str, dict[str, list[float]]] = {}
    for column, method, v in zip(table["column"], table["method"], table[value], strict=True):
        values.setdefault(column, {}).setdefault(method, []).append(float(v))
    return values


def _matches(setting: str, where: dict[str, Any]) -> bool:
    values = json.loads(setting)
    return all(values.get(k) == v for k, v in where.items())


def _label(setting: str) -> str:
    """'model.name=vit_tiny, partition.alpha=0.1' -> 'vit_tiny, alpha 0.1'."""
    values = json.loads(setting)
    parts = []
    for key, value in values.items():
        leaf = key.split(".")[-1]
        parts.append(str(value) if leaf == "name" else f"{leaf} {value}")
    return ", ".join(parts) or "all"


def ranking_claims(
    values: dict[str, dict[str, list[float]]],
    claimed: str,
    *,
    lower_is_better: bool,
    statement: str,
    measure: str,
) -> list[Claim]:
    """One claim per column: `claimed` is the best row, beyond noise of the runner-up."""
    found = []
    for column, by_method in values.items():
        ranking = rank(by_method, claimed, lower_is_better=lower_is_better)
        c = ranking.comparison
        sign = f"{ranking.rival} - {claimed}" if lower_is_better else f"{claimed} - {ranking.rival}"
        best = "" if ranking.best == claimed else f"; best row: {ranking.best}"
        found.append(
            Claim(
                statement=f"{statement} ({column})",
                statistic=(
                    f"{measure}, {sign} (Welch over {c.n_a} and {c.n_b} seeds, p = {c.p:.2g}{best})"
                ),
                value=c.estimate,
                interval=c.interval,
                holds=ranking.holds,
            )
        )
    return found


@FIGURES.register("fedadamw-fig6")
class FedAdamWFig6(TableFigure):
    paper = "FedAdamW (Liu et al., AAAI 2026), Figure 6"
    title = "Training loss over rounds of Table 1's rows"
    Settings = Fig6Settings
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        # Table 1's quick preset (digits; cnn in the ResNet-18 column, logreg in the ViT-Tiny
        # one), its Dir-0.1 columns, 3 seeds, run here first (`--set where={}`: all four).
        "quick": {
            "run": True,
            "table_preset": "quick",
            "seeds": 3,
            "where": {"partition.alpha": 0.1},
        }
    }

    def compute(self, settings: Any, context: FigureContext) -> FigureData:
        runs, curves, folder = self.read(settings, context)
        curves = curves.dropna(subset=["train_loss"])
        table = in_table_order(curves[["column", "method", "seed", "round", "train_loss"]])
        return FigureData(table, {"folder": folder, "runs": runs["run_id"].tolist()})

    def draw(self, data: FigureData, settings: Any) -> MplFigure:
        import matplotlib.pyplot as plt

        table = data.table
        columns = list(dict.fromkeys(table["column"]))
        methods = list(dict.fromkeys(table["method"]))
        ncols = min(2, len(columns))
        nrows = math.ceil(len(columns) / ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 3.6 * nrows), squeeze=False)
        for ax, column in zip(axes.flat, columns, strict=False):
            for i, method in enumerate(methods):
                rows = table[(table["column"] == column) & (table["method"] == method)]
                if rows.empty:
                    continue
                by_round = rows.groupby("round")["train_loss"]
                mean = by_round.mean()
                bold = method == settings.claimed
                ax.plot(
                    mean.index,
                    mean.values,
                    color=f"C{i}",
                    lw=2.2 if bold else 1.2,
                    label=method,
                    zorder=3 if bold else 2,
                )
            ax.set_title(column, fontsize=10)
            ax.set_xlabel("round")
            ax.set_ylabel("train loss")
        for ax in list(axes.flat)[len(columns) :]:
            ax.axis("off")
        axes.flat[0].legend(fontsize=7, ncol=2)
        fig.suptitle(self.caption(data, "mean"), fontsize=9)
        fig.tight_layout()
        return fig

    def claims(self, data: FigureData, settings: Any) -> list[Claim]:
        # The area under the loss curve (its mean over the evaluated rounds after round 0)
        # measures speed: a method that gets low early wins even if others catch up at the end.
        table = data.table[data.table["round"] > 0]
        means = table.groupby(["column", "method", "seed"])["train_loss"].mean().reset_index()
        return ranking_claims(
            by_column(means, "train_loss"),
            settings.claimed,
            lower_is_better=True,
            statement=f"{settings.claimed} converges fastest",
            measure="mean train loss over the evaluated rounds (area under the curve)",
        )
