"""FedAdamom's escape-rate figure (the FedAdamom summary, "escape rate experiments verify
theory"): the escape rate Gamma from a sharp minimum against its sharpness k for FedAvgM,
FedAdam and FedAdamom, and the exponent p of -log(Gamma) = a + b k^(-p) fitted per optimiser
with a bootstrap interval. The experiment itself is fedbench.figures.escape_rate."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, field_validator

from fedbench.figures.base import Claim, Figure, FigureContext, FigureData, FigureSettings
from fedbench.figures.registry import FIGURES

if TYPE_CHECKING:
    from matplotlib.figure import Figure as MplFigure


class EscapeSettings(FigureSettings):
    # Bounded: every trial is a particle held in memory for every k and optimiser.
    trials: int = Field(
        default=4000, ge=1, le=1_000_000, description="particles per k and optimiser"
    )
    rounds: int = Field(default=2000, ge=1, le=1_000_000)
    #: Sharpness values; None: eight, geometric over [1, 16] (more than a decade).
    ks: list[float] | None = None
    prefactor: Literal["fitted", "none"] = "fitted"
    bootstrap: int = Field(default=1000, ge=10, le=1_000_000)
    min_neg_log_gamma: float = Field(default=2.5, ge=0)

    @field_validator("ks")
    @classmethod
    def _positive(cls, ks: list[float] | None) -> list[float] | None:
        if ks is not None and (min(ks, default=0.0) <= 0 or len(set(ks)) != len(ks)):
            raise ValueError("ks must be distinct positive sharpness values")
        return ks


@FIGURES.register("fedadamom-escape")
class EscapeFigure(Figure):
    """-log(escape rate) against k and the fitted exponent p per optimiser."""

    paper = "FedAdamom summary, escape-rate experiment"
    title = "Escape rate from a sharp minimum vs its sharpness k: exponent p per optimiser"
    Settings = EscapeSettings
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "quick": {"trials": 1000, "rounds": 600, "bootstrap": 500}
    }

    def compute(self, settings: Any, context: FigureContext) -> FigureData:
        import pandas as pd
        import torch

        from fedbench.figures.escape_rate import EscapeSetup, run_escape

        torch.set_num_threads(1)  # many tiny tensors: threads only add overhead
        setup = replace(
            EscapeSetup(),
            trials=settings.trials,
            rounds=settings.rounds,
            prefactor=settings.prefactor,
            bootstrap=settings.bootstrap,
            min_neg_log_gamma=settings.min_neg_log_gamma,
            seed=settings.seed,
        )
        if settings.ks is not None:
            setup = replace(setup, ks=tuple(sorted(settings.ks)))
        result = run_escape(setup)
        rows = [
            {"optimizer": name, **row}
            for name, data in result["optimizers"].items()
            for row in data["rows"]
        ]
        return FigureData(pd.DataFrame(rows), {"result": result})

    def draw(self, data: FigureData, settings: Any) -> MplFigure:
        from fedbench.figures.escape_rate import draw_escape_figure

        return draw_escape_figure(data.extra["result"])

    def claims(self, data: FigureData, settings: Any) -> list[Claim]:
        from fedbench.figures.escape_rate import LABELS, PREDICTED_P, ExponentFit, verdict

        found = []
        for name, result in data.extra["result"]["optimizers"].items():
            fit = ExponentFit(**{**result["fit"], "interval": tuple(result["fit"]["interval"])})
            law = "1/k" if PREDICTED_P[name] == 1.0 else "k^-1/2"
            term = "c log k fitted" if settings.prefactor == "fitted" else "no prefactor term"
            found.append(
                Claim(
                    statement=f"-log(Gamma) of {LABELS[name]} = a + b {law} (p = "
                    f"{PREDICTED_P[name]:g})",
                    statistic=f"fitted exponent p ({term}, {fit.points} k values"
                    + (", at the grid's edge" if fit.at_grid_edge else "")
                    + ")",
                    value=fit.p,
                    holds=verdict(fit, PREDICTED_P[name]),
                    interval=fit.interval,
                )
            )
        return found
