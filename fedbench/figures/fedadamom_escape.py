"""FedAdamom's escape-rate figure (the FedAdamom summary, "escape rate experiments verify
theory"): escape rates from a sharp minimum against its sharpness k for FedAvgM, FedAdam and
FedAdamom. The experiment itself is fedbench.report.escape."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from fedbench.figures.base import Claim, Figure, FigureContext, FigureData, FigureSettings
from fedbench.figures.registry import FIGURES

if TYPE_CHECKING:
    from matplotlib.figure import Figure as MplFigure


class EscapeSettings(FigureSettings):
    trials: int = 2000
    rounds: int = 200


@FIGURES.register("fedadamom-escape")
class EscapeFigure(Figure):
    """-log(escape rate) against 1/k and k^(-1/2), one fit per optimiser."""

    name = "fedadamom-escape"
    paper = "FedAdamom summary, escape-rate experiment"
    title = "Escape rates from a sharp minimum vs its sharpness k (FedAvgM, FedAdam, FedAdamom)"
    Settings = EscapeSettings
    presets: ClassVar[dict[str, dict[str, Any]]] = {"quick": {"trials": 200, "rounds": 100}}

    def compute(self, settings: Any, context: FigureContext) -> FigureData:
        import pandas as pd
        import torch

        from fedbench.report.escape import EscapeSetup, run_escape

        torch.set_num_threads(1)  # many tiny tensors: threads only add overhead
        setup = replace(
            EscapeSetup(), trials=settings.trials, rounds=settings.rounds, seed=settings.seed
        )
        result = run_escape(setup)
        rows = [
            {"optimizer": name, **row}
            for name, data in result["optimizers"].items()
            for row in data["rows"]
        ]
        return FigureData(pd.DataFrame(rows), {"result": result})

    def draw(self, data: FigureData, settings: Any) -> MplFigure:
        from fedbench.report.escape import draw_escape_figure

        return draw_escape_figure(data.extra["result"])

    def claims(self, data: FigureData, settings: Any) -> list[Claim]:
        from fedbench.report.escape import LABELS, PREDICTED

        found = []
        for name, result in data.extra["result"]["optimizers"].items():
            fit = result["fits"][PREDICTED[name]]
            law = "1/k" if PREDICTED[name] == "inv_k" else "k^-1/2"
            r = fit["pearson_r"]
            found.append(
                Claim(
                    statement=f"-log(Gamma) of {LABELS[name]} is linear in {law}",
                    statistic=f"Pearson r of the {law} fit over {fit['points']} k values",
                    value=r,
                    holds=None if not math.isfinite(r) else r >= 0.99,
                )
            )
        return found
