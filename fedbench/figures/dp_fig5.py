"""DP-FedAdamW (Liu, Miao, Xi, Liu), Figure 5: test accuracy of DP Table 2's rows on CIFAR-100,
Dir-0.6 and Dir-0.1, as bars (the paper shows ResNet-18 and Swin-Tiny; fedbench's dp_table2 is
the ResNet-18 half, `--set table=dp_table2_vit` the transformer half).

Like fedadamw-fig6 it reads a results folder (`fedbench run dp_table2` writes OUT/dp_table2) and
retrains nothing; the `quick` preset runs the table's quick sweep first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from fedbench.figures.base import Claim, FigureContext, FigureData
from fedbench.figures.fedadamw_fig6 import (
    TableFigure,
    TableFigureSettings,
    by_column,
    in_table_order,
    ranking_claims,
)
from fedbench.figures.registry import FIGURES

if TYPE_CHECKING:
    from matplotlib.figure import Figure as MplFigure


class DPFig5Settings(TableFigureSettings):
    table: str = "dp_table2"
    where: dict[str, Any] = Field(default_factory=lambda: {"data.name": "cifar100"})
    claimed: str = "DP-FedAdamW"


@FIGURES.register("dp-fig5")
class DPFig5(TableFigure):
    paper = "DP-FedAdamW (Liu, Miao, Xi, Liu), Figure 5"
    title = "Test accuracy of DP Table 2's rows (sigma 1)"
    Settings = DPFig5Settings
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        # dp_table2's quick preset (digits, logreg), the cifar100 columns, 3 seeds, run here.
        "quick": {"run": True, "table_preset": "quick", "seeds": 3}
    }

    def compute(self, settings: Any, context: FigureContext) -> FigureData:
        runs, _, folder = self.read(settings, context)
        table = runs[["column", "method", "seed", "test_acc", "run_id"]].dropna(subset=["test_acc"])
        return FigureData(in_table_order(table), {"folder": folder})

    def draw(self, data: FigureData, settings: Any) -> MplFigure:
        import matplotlib.pyplot as plt
        import numpy as np

        table = data.table
        columns = list(dict.fromkeys(table["column"]))
        methods = list(dict.fromkeys(table["method"]))
        width = 0.8 / len(methods)
        fig, ax = plt.subplots(figsize=(max(5.0, 0.45 * len(methods) * len(columns) + 1.5), 3.8))
        for i, method in enumerate(methods):
            for j, column in enumerate(columns):
                values = table[(table["column"] == column) & (table["method"] == method)]
                acc = values["test_acc"].to_numpy(dtype=float)
                if not len(acc):
                    continue
                x = j + (i - (len(methods) - 1) / 2) * width
                ax.bar(
                    x,
                    acc.mean(),
                    width,
                    yerr=acc.std(ddof=1) if len(acc) > 1 else 0.0,
                    color=f"C{i}",
                    edgecolor="k" if method == settings.claimed else "none",
                    capsize=2,
                    label=method if j == 0 else None,
                )
                ax.plot(np.full(len(acc), x), acc, "k.", ms=3)
        ax.set_xticks(range(len(columns)), columns)
        ax.set_ylabel("test accuracy (%)")
        low = table["test_acc"].min()
        ax.set_ylim(max(0.0, low - 10), min(100.0, table["test_acc"].max() + 5))
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.set_title(self.caption(data, "mean ± std", ", dots: seeds"), fontsize=9)
        fig.tight_layout()
        return fig

    def claims(self, data: FigureData, settings: Any) -> list[Claim]:
        return ranking_claims(
            by_column(data.table, "test_acc"),
            settings.claimed,
            lower_is_better=False,
            statement=f"{settings.claimed} has the highest test accuracy",
            measure="final test accuracy (points)",
        )
