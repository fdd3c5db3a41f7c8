"""A whole smoke check: the cells of a table's plan (one per row and column, the first seed) or
of a figure's experiment, with its header, one line per cell and its verdict."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from fedbench.config import DataConfig
from fedbench.files import temporary_folder
from fedbench.report.ran import cell_label
from fedbench.runner.smoke.cells import SmokeCell, smoke_config
from fedbench.runner.smoke.data import smoke_data
from fedbench.runner.smoke.figure_runs import FigureSmoker, SmokeFailed
from fedbench.runner.smoke.report import SmokeReport, header
from fedbench.runner.smoke.run import one_line, run_cells
from fedbench.runner.table_config import Plan, column_key


def plan_cells(plan: Plan, data_root: Path) -> list[SmokeCell]:
    """One smoke cell per (row, column) of the plan: its first seed's config."""
    cells, seen = [], set()
    for run in plan.runs:
        key = (run.method, column_key(run.setting))
        if key in seen:
            continue
        seen.add(key)
        cell = smoke_config(run.cfg, data_root)
        # The column as the tables name it (ResNet-18 / Dir-0.6), not as a config key reads.
        where = cell_label(run.setting, run.cfg.to_dict())
        cell.label = run.method if where == "-" else f"{run.method} | {where}"
        cells.append(cell)
    return cells


def smoke_plan(plan: Plan, say: Callable[[str], None]) -> SmokeReport:
    """Smoke-check every (row, column) of `plan` (module docstring)."""
    t0 = time.perf_counter()
    report = SmokeReport(plan.name)
    with temporary_folder("fedbench-smoke-data-") as tmp:
        cells = plan_cells(plan, tmp)
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
    from fedbench.figures.registry import FIGURES

    FIGURES.get(name)  # an unknown name: its one line (exit code 2), before anything runs
    t0 = time.perf_counter()
    report = SmokeReport(f"figure {name}")
    with (
        temporary_folder("fedbench-smoke-data-") as data,
        temporary_folder("fedbench-smoke-out-") as out,
    ):
        smoker = FigureSmoker(data, say, report)
        # A figure that loads a dataset itself (the Hessian's) finds the generated one.
        for dataset in ("cifar10", "cifar100", "fmnist", "tinyimagenet"):
            smoke_data(DataConfig(name=dataset), data)
        previous = os.environ.get("FEDBENCH_DATA")
        os.environ["FEDBENCH_DATA"] = str(data)
        try:
            make_figure(name, out=out, smoke=smoker)
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
