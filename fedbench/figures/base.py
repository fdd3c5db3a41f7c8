"""The figure contract: one class per paper figure, registered by name in FIGURES.

A figure owns its settings (a pydantic model whose defaults are the paper's setting; presets
such as `quick` override some fields), the experiment (`compute`, which trains through the
engine's run folders so that a rerun resumes and a finished run is read, not retrained), the
drawing (`draw`, a matplotlib figure of the data `compute` returned) and the claim the paper
makes with it (`claims`, each checked by a number). `fedbench.figures.make.make_figure` does
the rest: settings, folders, PNG + PDF + CSV + claims.json, the printed claim lines.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from fedbench.strict import Seed, Strict

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure as MplFigure

    from fedbench.config import RunConfig
    from fedbench.runner.launcher import Outcome
    from fedbench.runner.smoke.figure_runs import FigureSmoker


class FigureSettings(Strict):
    """A figure's settings; subclasses add their fields with the paper's values as defaults."""

    seed: Seed = 0


@dataclass(frozen=True)
class Claim:
    """One claim of the paper, checked by one statistic.

    `holds` is True or False when the statistic decides it, None when it cannot (for example
    too few points for an interval, or an interval that contains the null value: within noise;
    fedbench.figures.stats.exceeds); `interval` is a 95% interval of `value` where one exists.
    """

    statement: str
    statistic: str
    value: float
    holds: bool | None
    interval: tuple[float, float] | None = None

    @property
    def verdict(self) -> str:
        return {True: "holds", False: "does not hold", None: "undecided"}[self.holds]

    def line(self) -> str:
        """`holds: <statement> (<statistic> = v, 95% interval [lo, hi])`."""
        shown = _number(self.value)
        if self.interval is not None:
            lo, hi = self.interval
            shown += f", 95% interval [{_number(lo)}, {_number(hi)}]"
        return f"{self.verdict}: {self.statement} ({self.statistic} = {shown})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "statement": self.statement,
            "statistic": self.statistic,
            "value": self.value,
            "interval": list(self.interval) if self.interval is not None else None,
            "holds": self.holds,
            "verdict": self.verdict,
        }


def _number(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else str(value)


@dataclass
class FigureData:
    """What `compute` measured: `table` is the plotted data (written as the figure's CSV);
    `extra` holds anything else `draw` and `claims` need (JSON-serialisable)."""

    table: pd.DataFrame
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class FigureContext:
    """Where a figure's experiment writes: `out` is the output root (its runs/ folder holds the
    run folders the figure trains, shared with tables and resumed like theirs), `folder` the
    figure's own folder for its files."""

    out: Path
    folder: Path
    workers: int | None = None
    #: `fedbench figure NAME --smoke`: every run trains in its smoke form (FigureSmoker).
    smoke: FigureSmoker | None = None

    def train(
        self, configs: list[RunConfig], *, allow_diverged: bool = False, save_model: bool = False
    ) -> list[Path]:
        """Train (or resume, or read back) each run config under out/runs; return the run
        folders in the order given. A run that fails or diverges is an error of the figure;
        with `allow_diverged` a diverged run is returned too (a learning-rate search expects
        some: its summary.json says `diverged`). With `save_model` every folder must hold the
        final model.pt (a figure that inspects the trained model): a run trained now writes it,
        a finished one without it is an error saying how to retrain it."""
        from rich.console import Console

        from fedbench.runner.launcher import SweepProgress, run_one

        if self.smoke is not None:
            from fedbench.engine.run_folder import RunFolder

            smoked = self.smoke.train(configs, self.out, save_model=save_model)
            return [RunFolder.for_config(self.out, cfg).path for cfg in smoked]
        folders = []
        # One line per finished run off a terminal (a bar on one), as a sweep prints: a figure
        # of many runs used to print nothing until its end.
        progress = SweepProgress(Console(stderr=True), len(configs), 1, self.folder.name)
        try:
            for cfg in configs:
                outcome = run_one(cfg.to_dict(), str(self.out), save_model=save_model)
                progress.finished(outcome.run_id, outcome)
                folders.append(self._checked(cfg, outcome, allow_diverged, save_model))
        finally:
            progress.close()
        return folders

    def _checked(
        self, cfg: RunConfig, outcome: Outcome, allow_diverged: bool, save_model: bool
    ) -> Path:
        """The run folder of a finished figure run, or the error that stops the figure."""
        from fedbench.engine.run_folder import RunFolder
        from fedbench.errors import FedbenchError

        if outcome.status != "completed" and not (allow_diverged and outcome.status == "diverged"):
            raise FedbenchError(
                f"figure run {outcome.run_id} {outcome.status}: {outcome.error or 'no detail'}"
                f"; see {self.out / 'runs' / outcome.run_id}"
            )
        folder = RunFolder.for_config(self.out, cfg)
        if save_model and not folder.model.exists():
            raise FedbenchError(
                f"run {outcome.run_id} finished without its model.pt, which this figure "
                f"reads; delete {folder.path} to retrain it"
            )
        return folder.path

    def sweep(
        self,
        table: str,
        *,
        kind: Literal["table", "ablation"] = "table",
        preset: str | None = None,
        seeds: int | list[int] | None = None,
        methods: list[str] | None = None,
        overrides: list[str] | None = None,
        where: dict[str, Any] | None = None,
    ) -> Path:
        """Run (or resume, or read back) a table's sweep into OUT, as `fedbench run TABLE`
        would, keeping only the columns whose setting matches `where` (column key -> value);
        return its table folder OUT/<table>[-<preset>]. A failed or diverged run is an error of
        the figure."""
        from dataclasses import replace

        from rich.console import Console

        from fedbench.errors import FedbenchError
        from fedbench.runner.sweep import make_plan, run_sweep

        plan = make_plan(
            table, kind, preset=preset, seeds=seeds, methods=methods, overrides=overrides
        )
        if where:
            runs = [r for r in plan.runs if all(r.setting.get(k) == v for k, v in where.items())]
            if not runs:
                columns = sorted({json.dumps(r.setting) for r in plan.runs})
                raise FedbenchError(
                    f"no column of {table} matches {json.dumps(where)}; its columns: "
                    + "; ".join(columns)
                )
            plan = replace(plan, runs=runs)
        if self.smoke is not None:  # the smoke runs first, then the sweep only reads them back
            smoked = self.smoke.train([r.cfg for r in plan.runs], self.out)
            plan = replace(
                plan, runs=[replace(r, cfg=c) for r, c in zip(plan.runs, smoked, strict=True)]
            )
        result = run_sweep(plan, self.out, workers=self.workers, console=Console(stderr=True))
        if result.problems:
            what, outcome = result.problems[0]
            raise FedbenchError(
                f"{len(result.problems)} run(s) of {plan.name} did not finish, e.g. {what}: "
                f"{outcome.status} ({outcome.error or 'no detail'}); fix it and rerun: finished "
                "runs are kept"
            )
        return result.folder


class Figure(ABC):
    """A paper figure: settings, experiment, drawing and the claim it makes."""

    #: The name `fedbench figure NAME` takes, set by `@FIGURES.register(NAME)`.
    name: ClassVar[str]
    #: Which paper figure it reproduces, e.g. "FedAdamW (Liu et al., AAAI 2026), Figure 2".
    paper: ClassVar[str]
    #: One line: what the figure shows.
    title: ClassVar[str]
    #: The settings model; its defaults are the paper's setting.
    Settings: ClassVar[type[FigureSettings]] = FigureSettings
    #: Named presets: settings field -> value; `quick` runs on a 2-core CPU in a few minutes.
    presets: ClassVar[dict[str, dict[str, Any]]] = {}
    #: Settings a smoke check (`--smoke`) needs on top of the paper's to run the experiment from
    #: nothing, e.g. `run: true` for a figure that otherwise reads a finished table.
    smoke_settings: ClassVar[dict[str, Any]] = {}

    @abstractmethod
    def compute(self, settings: Any, context: FigureContext) -> FigureData:
        """Run (or read back) the experiment and return the plotted data."""

    @abstractmethod
    def draw(self, data: FigureData, settings: Any) -> MplFigure:
        """The matplotlib figure of `data` (saved as PNG and PDF by the caller)."""

    @abstractmethod
    def claims(self, data: FigureData, settings: Any) -> list[Claim]:
        """The paper's claims about this figure, each checked by a number from `data`."""
