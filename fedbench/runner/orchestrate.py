"""What `fedbench run`, `ablate` and `tune` ask of the runner, carried out in one call each:
the options checked, the plan made (tuned values, seeds, rows), the sweep or the tune run, and
the lines a person reads after it (docs/sweeps.md, docs/tuning.md)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from fedbench.errors import FedbenchError, Interrupted
from fedbench.listing import Listing
from fedbench.runner.selection import check_launcher, check_workers, parse_methods, parse_seeds

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from fedbench.runner.smoke.report import SmokeReport
    from fedbench.runner.sweep import SweepResult
    from fedbench.runner.table_config import Plan


@dataclass(frozen=True)
class SweepRequest:
    """A sweep as `fedbench run TABLE` / `fedbench ablate NAME` gives it (options as typed)."""

    name: str
    kind: Literal["table", "ablation"] = "table"
    preset: str | None = None
    seeds: str | None = None
    methods: str | None = None
    overrides: list[str] = field(default_factory=list)
    out: Path = Path("results")
    workers: int | None = None
    dry_run: bool = False
    estimate: bool = False
    plan_file: Path | None = None
    launcher: str = "local"
    ray_address: str | None = None
    tuned_file: Path | None = None


def request_plan(request: SweepRequest) -> Plan:
    """The plan of a request: its table at the preset, seeds and rows asked for, each cell at
    its tuned values when a tuned.yaml is given."""
    from fedbench.runner.preflight import check_runs_here
    from fedbench.runner.sweep import make_plan
    from fedbench.runner.table_config import load_table
    from fedbench.runner.tune import check_tuned_columns, load_tuned, tuned_split

    tuned = None
    if request.tuned_file is not None:
        tuned = load_tuned(request.tuned_file, load_table(request.name, request.kind))
    plan = make_plan(
        request.name,
        request.kind,
        preset=request.preset,
        seeds=parse_seeds(request.seeds),
        methods=parse_methods(request.methods),
        overrides=request.overrides,
        tuned=tuned,
    )
    if request.tuned_file is not None and tuned:
        check_tuned_columns(request.tuned_file, tuned, plan)
        plan.tuned_on = tuned_split(request.tuned_file)
    if request.launcher == "local":
        check_runs_here(plan)
    return plan


def interrupted_line(plan: Plan, out: Path, resume: str) -> str:
    """What a Ctrl-C during a sweep says: how far it got, what is kept, the command to resume."""
    from fedbench.engine.run_folder import RunFolder

    runs = {r.run_id: r for r in plan.runs}
    done = sum(RunFolder.for_config(out, r.cfg).is_finished() for r in runs.values())
    return (
        f"interrupted {plan.name} after {done} of {len(runs)} runs; finished runs are kept "
        f"and unfinished ones resume from their checkpoints in {out / 'runs'}; resume: {resume}"
    )


def sweep(
    request: SweepRequest, *, console: Console, err_console: Console, resume: str
) -> SweepResult | None:
    """Check the request, plan it, and either print the plan (`--dry-run`, `--estimate`: None)
    or run every run and build the report (`result.report`). `resume` is the command that
    continues an interrupted sweep (a Ctrl-C raises Interrupted saying so)."""
    from fedbench.runner.sweep import print_dry_run, run_sweep, seeds_note, write_json_plan

    dry_run = request.dry_run or request.estimate
    check_launcher(request.launcher, request.workers, request.ray_address, dry_run)
    plan = request_plan(request)
    note = seeds_note(plan)
    if note:
        console.print(note, highlight=False, soft_wrap=True)
    if request.plan_file is not None:
        write_json_plan(plan, request.plan_file)
        console.print(f"plan: {request.plan_file}", highlight=False, soft_wrap=True)
    if dry_run:
        print_dry_run(
            plan,
            request.out,
            console=console,
            err_console=err_console,
            probe=request.estimate,
            workers=request.workers,
        )
        return None
    try:
        return run_sweep(
            plan,
            request.out,
            workers=request.workers,
            console=console,
            launcher="ray" if request.launcher == "ray" else "local",
            ray_address=request.ray_address,
            report=True,
        )
    except KeyboardInterrupt:
        raise Interrupted(interrupted_line(plan, request.out, resume)) from None


def smoke_sweep(request: SweepRequest, say: Callable[[str], None]) -> SmokeReport:
    """`fedbench run TABLE --smoke`: every (row, column) of the request's plan in smoke form
    (fedbench.runner.smoke); nothing is written to --out."""
    from fedbench.runner.smoke.check import smoke_plan

    if request.dry_run or request.estimate or request.plan_file is not None:
        raise FedbenchError("--smoke trains; drop --dry-run, --estimate and --write-plan")
    if request.launcher != "local":
        raise FedbenchError("--smoke runs here, one cell after another; drop --launcher")
    return smoke_plan(request_plan(request), say)


@dataclass(frozen=True)
class TuneRequest:
    """A tune as `fedbench tune TABLE` gives it (options as typed)."""

    target: str
    space: list[str] = field(default_factory=list)
    grid: list[str] = field(default_factory=list)
    trials: int | None = None
    rounds: int | None = None
    val_fraction: float = 0.1
    columns: list[str] | None = None
    preset: str | None = None
    methods: str | None = None
    overrides: list[str] = field(default_factory=list)
    out: Path = Path("results")
    workers: int | None = None
    seed: int = 0
    pruner: str = "median"


def check_tune(request: TuneRequest) -> None:
    check_workers(request.workers)
    if not 0 <= request.seed < 2**32:
        raise FedbenchError(
            f"--seed {request.seed} is out of range; the sampler's seed is in [0, 2**32)"
        )


def apply_hint(request: TuneRequest, command: str, tuned_file: Path) -> str:
    """How to use a tuned.yaml: the run with the same --preset and --set as the tune, so that it
    trains the columns tuned here (a single run config: --set with the values shown)."""
    if command == "train":
        how = "--set with the values above"
    else:
        again = "".join(f"--set {shlex.quote(s)} " for s in request.overrides)
        preset = f"--preset {request.preset} " if request.preset else ""
        how = f"`fedbench {command} {request.target} {preset}{again}--tuned {tuned_file}`"
    return f"wrote {tuned_file}; apply it with {how}"


def tune_table(request: TuneRequest, on_trial: Callable[[str], None]) -> tuple[Listing, str]:
    """Tune every (row, column) of the request's table (fedbench.runner.tune); returns the best
    values per cell and the line saying where tuned.yaml is and how to apply it."""
    from fedbench.runner.launcher import default_workers, launch
    from fedbench.runner.preflight import check_runs_here
    from fedbench.runner.tune import (
        check_pruner,
        parse_grid,
        parse_space,
        plan_to_tune,
        shown_values,
        tune,
    )

    check_tune(request)
    check_pruner(request.pruner)
    fields = [parse_space(s) for s in request.space] + [parse_grid(g) for g in request.grid]
    plan, command = plan_to_tune(
        request.target,
        preset=request.preset,
        methods=parse_methods(request.methods),
        overrides=request.overrides,
    )
    check_runs_here(plan)
    out, workers = request.out, request.workers
    # Trials run `workers` at once, those of one cell too; by default as many as `fedbench run`
    # would (one per CPU core, or runtime.runs_per_gpu per GPU).
    batch = workers or default_workers(plan)
    result = tune(
        plan,
        fields,
        out=out,
        trials=request.trials,
        rounds=request.rounds,
        val_fraction=request.val_fraction,
        launch=lambda p: launch(p, out, workers=workers, console=None),
        columns=request.columns,
        seed=request.seed,
        batch=batch,
        pruner=request.pruner,
        on_trial=on_trial,
    )
    rows = []
    for method, col, values, score, done, pruned, failed in result.rows:
        shown = shown_values(values)
        label = result.labels.get((method, col), col)
        rows.append([method, label, shown or "-", f"{score:.2f}", f"{done}/{pruned}/{failed}"])
    view = Listing(
        f"{plan.name}: tuned on a {request.val_fraction:g} validation split",
        ["method", "column (what ran)", "best values", "val test_acc", "done/pruned/failed"],
        rows,
        fold=True,
    )
    return view, apply_hint(request, command, result.folder / "tuned.yaml")
