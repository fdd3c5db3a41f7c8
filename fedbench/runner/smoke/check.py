"""A whole smoke check: the cells of a table's plan (one per row and column, the first seed) or
of a figure's experiment, a header saying what ran where and what was replaced, one line per
cell, and the verdict (exit code 1 when any cell failed)."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from fedbench.config import DataConfig, RunConfig
from fedbench.runner.smoke.cells import SmokeCell, smoke_config
from fedbench.runner.smoke.data import smoke_data
from fedbench.runner.smoke.run import SmokeOutcome, one_line, run_cells
from fedbench.runner.table_config import Plan, column_key


@dataclass
class SmokeReport:
    """The outcome of `--smoke`: one outcome per cell and the lines printed."""

    name: str
    outcomes: list[SmokeOutcome] = field(default_factory=list)
    seconds: float = 0.0
    #: A failure outside the cells (a figure's own computation after its runs).
    error: str | None = None

    @property
    def failed(self) -> list[SmokeOutcome]:
        return [o for o in self.outcomes if not o.ok and not o.refused]

    @property
    def refused(self) -> list[SmokeOutcome]:
        return [o for o in self.outcomes if o.refused]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed or self.error else 0

    def verdict(self) -> str:
        runs = sum(o.shared_with is None for o in self.outcomes)
        ok = len(self.outcomes) - len(self.failed) - len(self.refused)
        refused = f", {len(self.refused)} refused up front (n/a)" if self.refused else ""
        head = (
            f"smoke {self.name}: {ok}/{len(self.outcomes)} cells ok{refused} ({runs} distinct "
            f"runs) in {self.seconds:.1f} s"
        )
        if self.error:
            return f"{head}; FAIL after the runs: {self.error}"
        return head if not self.failed else f"{head}; {len(self.failed)} FAILED"


def _device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(0)})"
    return "cpu"


def header(name: str, cells: list[SmokeCell]) -> list[str]:
    """What the check runs, where, and every replacement any cell makes (each once)."""
    replaced: list[str] = []
    for cell in cells:
        replaced += [r for r in cell.replaced if r not in replaced]
    lines = [
        f"smoke {name}: {len(cells)} cells at paper settings (model, input shape, classes, "
        f"LoRA, privacy, algorithm, engine, precision) on {_device()}; replaced:"
    ]
    return lines + [f"  {r}" for r in replaced]


def plan_cells(plan: Plan, data_root: Path) -> list[SmokeCell]:
    """One smoke cell per (row, column) of the plan: its first seed's config."""
    cells, seen = [], set()
    for run in plan.runs:
        key = (run.method, column_key(run.setting))
        if key in seen:
            continue
        seen.add(key)
        cell = smoke_config(run.cfg, data_root)
        where = column_key(run.setting)
        cell.label = run.method if where == "-" else f"{run.method} | {where}"
        cells.append(cell)
    return cells


def smoke_plan(plan: Plan, say: Callable[[str], None]) -> SmokeReport:
    """Smoke-check every (row, column) of `plan` (module docstring)."""
    t0 = time.perf_counter()
    report = SmokeReport(plan.name)
    with tempfile.TemporaryDirectory(prefix="fedbench-smoke-data-") as tmp:
        cells = plan_cells(plan, Path(tmp))
        for line in header(plan.name, cells):
            say(line)
        report.outcomes = run_cells(cells, say)
    report.seconds = time.perf_counter() - t0
    say(report.verdict())
    return report


def smoke_figure(name: str, say: Callable[[str], None]) -> SmokeReport:
    """Smoke-check figure NAME at its paper settings: every run its experiment trains, in smoke
    form (one line each), then its own computation, drawing and claims on those runs."""
    from fedbench.figures.make import make_figure

    t0 = time.perf_counter()
    report = SmokeReport(f"figure {name}")
    with (
        tempfile.TemporaryDirectory(prefix="fedbench-smoke-data-") as data,
        tempfile.TemporaryDirectory(prefix="fedbench-smoke-out-") as out,
    ):
        smoker = FigureSmoker(Path(data), say, report)
        # A figure that loads a dataset itself (the Hessian's) finds the generated one.
        for dataset in ("cifar10", "cifar100", "fmnist", "tinyimagenet"):
            smoke_data(DataConfig(name=dataset), Path(data))
        previous = os.environ.get("FEDBENCH_DATA")
        os.environ["FEDBENCH_DATA"] = data
        try:
            make_figure(name, out=Path(out), smoke=smoker)
        except SmokeFailed:
            pass  # the failed cells' lines say it
        except Exception as exc:  # reported as the check's one line
            report.error = report.error or one_line(exc)
        finally:
            if previous is None:
                os.environ.pop("FEDBENCH_DATA", None)
            else:
                os.environ["FEDBENCH_DATA"] = previous
    report.seconds = time.perf_counter() - t0
    say(report.verdict())
    return report


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
