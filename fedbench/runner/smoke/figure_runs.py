"""A figure's runs in smoke form (`fedbench figure NAME --smoke`): what the figure's context
calls instead of training (fedbench.figures.base.FigureContext.smoke)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fedbench.config import RunConfig
from fedbench.runner.smoke.cells import SmokeCell, smoke_config
from fedbench.runner.smoke.report import SmokeReport, header
from fedbench.runner.smoke.run import run_cells


@dataclass
class FigureSmoker:
    """What a figure's context calls in smoke mode: each config it would train becomes a smoke
    cell, trained (once per distinct config) in the figure's output folder so that its
    computation can read the runs back."""

    data_root: Path
    say: Callable[[str], None]
    report: SmokeReport
    announced: bool = False

    def cells(self, configs: list[RunConfig]) -> list[SmokeCell]:
        cells = []
        for cfg in configs:
            cell = smoke_config(cfg, self.data_root)
            cell.label = run_label(cfg)
            cells.append(cell)
        if not self.announced:
            for line in header(self.report.name, cells):
                self.say(line)
            self.announced = True
        return cells

    def train(
        self, configs: list[RunConfig], out: Path, save_model: bool = False
    ) -> list[RunConfig]:
        """Train the smoke form of each config into `out`; return the smoke configs (their run
        folders are where the figure reads the results). A failed cell stops the figure."""
        cells = self.cells(configs)
        outcomes = run_cells(cells, self.say, out=out, save_model=save_model)
        self.report.outcomes += outcomes
        # A figure's run refused at its paper settings is a fault of the figure (a table's
        # refused row, e.g. an algorithm fedbench does not implement, is by design).
        failed = [o for o in outcomes if not o.ok]
        if failed:
            self.report.error = (
                f"{len(failed)} run(s) of the figure cannot run at its paper settings, e.g. "
                f"{failed[0].label}: {failed[0].error}"
            )
            raise SmokeFailed(self.report.error)
        return [cell.cfg for cell in cells]


class SmokeFailed(Exception):
    """A figure's smoke runs failed (their lines are printed): its computation cannot go on."""


def run_label(cfg: RunConfig) -> str:
    """A figure cell's label: what distinguishes the runs of a figure."""
    parts = [cfg.algorithm.name, cfg.model.name, cfg.data.name, cfg.partition.kind]
    if cfg.partition.kind.startswith("dirichlet"):
        parts[-1] += f"-{cfg.partition.alpha:g}"
    return " ".join(parts) + f" seed {cfg.seed}"
