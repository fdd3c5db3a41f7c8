"""A sweep: table config -> plan -> launcher -> report (docs/tables.md)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rich.console import Console
from rich.table import Table

from fedbench.engine.run_folder import RunFolder, child_folder, write_json_atomic
from fedbench.errors import FedbenchError
from fedbench.files import remove_stale_temporaries
from fedbench.os_errors import disk_error_line
from fedbench.readback import BadFile, read_plan_file
from fedbench.report.ran import cell_label, plan_sentence
from fedbench.runner.launcher import Outcome, launch, local_slots, unique_runs, visible_gpus
from fedbench.runner.preflight import check_runs_here, require_resources
from fedbench.runner.report_folder import claim_report_folder, plan_fingerprint
from fedbench.runner.table_config import Plan, Tuned, expand, load_table

if TYPE_CHECKING:
    from fedbench.report import Report

PLAN_FILE = "plan.json"


@dataclass
class SweepResult:
    plan: Plan
    folder: Path
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    report: Report | None = None  # with run_sweep(report=True)

    @property
    def problems(self) -> list[tuple[str, Outcome]]:
        """(description, outcome) of every run that failed or diverged."""
        described = {r.run_id: r for r in self.plan.runs}
        out = []
        for run_id, outcome in self.outcomes.items():
            if outcome.status in ("failed", "diverged"):
                run = described[run_id]
                where = cell_label(run.setting, run.cfg.to_dict())
                out.append((f"{run.method} {where} seed {run.seed} ({run_id})", outcome))
        return out

    @property
    def exit_code(self) -> int:
        return 1 if self.problems else 0


def make_plan(
    name: str,
    kind: Literal["table", "ablation"] = "table",
    *,
    preset: str | None = None,
    seeds: int | list[int] | None = None,
    methods: list[str] | None = None,
    overrides: list[str] | None = None,
    tuned: Tuned | None = None,
) -> Plan:
    table = load_table(name, kind)
    return expand(
        table, preset=preset, seeds=seeds, methods=methods, overrides=overrides, tuned=tuned
    )


def plan_table_view(plan: Plan) -> Table:
    """One line per (row, column): its seeds, client steps and the first run id. Columns are
    named by what runs in them ('CNN for ResNet-18 / Dir-0.6' under a preset), and the caption
    says what the runs train, with the preset named."""
    by_column: dict[str, list[dict]] = {}
    labels = []
    for run in plan.runs:
        cfg = run.cfg.to_dict()
        by_column.setdefault(json.dumps(run.setting), []).append(cfg)
        labels.append(cell_label(run.setting, cfg))
    view = Table(
        title=f"{plan.name}: {len(plan.runs)} runs",
        caption=f"what runs: {plan_sentence(plan.preset, by_column)}",
        caption_justify="left",
    )
    for col in ("method", "column (what runs)", "seeds", "client steps", "algorithm"):
        view.add_column(col, overflow="fold")
    view.add_column("first run id", overflow="fold")
    cells: dict[tuple[str, str], list] = {}
    for run, where in zip(plan.runs, labels, strict=True):
        cells.setdefault((run.method, where), []).append(run)
    for (method, where), runs in cells.items():
        view.add_row(
            method,
            where,
            ",".join(str(r.seed) for r in runs),
            f"{sum(r.client_steps() for r in runs):,}",
            runs[0].cfg.algorithm.name,
            runs[0].run_id,
        )
    return view


def print_dry_run(
    plan: Plan,
    out: Path,
    *,
    console: Console,
    err_console: Console,
    probe: bool = False,
    workers: int | None = None,
) -> None:
    """`--dry-run`: the plan, its client steps, its estimated time, and what a real sweep would
    miss on this machine (a warning: a plan needs no data). Nothing is downloaded or written.
    `probe` (`--estimate`) measures the plan's workloads here (for a sweep of `workers`) instead
    of reading the devices' `fedbench bench --suite` figures."""
    from fedbench.runner.estimate import estimate_lines
    from fedbench.runner.preflight import check_plan, missing_warning

    checked = check_plan(plan, out, download=False)  # the same check as a real sweep
    console.print(plan_table_view(plan))
    unique = len({r.run_id for r in plan.runs})
    console.print(
        f"{len(plan.runs)} runs ({unique} distinct), {plan.client_steps():,} client steps "
        f"(local steps summed over clients and rounds); outputs: {child_folder(out, plan.name)}",
        highlight=False,
    )

    def log(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    slots, threads = probe_slots(plan, workers) if probe else (1, None)
    lines = estimate_lines(
        plan, out, probe=probe, log=log if probe else None, slots=slots, threads=threads
    )
    for line in lines:
        log(line)
    if checked.missing:
        err_console.print(
            missing_warning(plan.name, checked.missing),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    else:
        log(checked.found_line())
    from fedbench.runner.execution_plans import execution_plan_lines

    for line in execution_plan_lines(plan, bool(checked.missing)):
        log(line)
    from fedbench.runner.plugin_lines import plan_plugin_lines

    for line in plan_plugin_lines(plan):
        log(line)


def probe_slots(plan: Plan, workers: int | None) -> tuple[int, int | None]:
    """The workers a sweep of the plan would run side by side here, and the torch threads of
    each (fedbench.runner.launcher.launch; None: one CPU worker, which trains in the sweep's own
    process with torch's default): what `--estimate` probes with."""
    import os

    runs = unique_runs(plan)
    gpus = visible_gpus()
    runs_per_gpu = max((run.cfg.runtime.runs_per_gpu for run in runs), default=1)
    slots = max(1, len(local_slots(workers, runs_per_gpu, gpus)[: len(runs)]))
    threads = None if gpus or slots == 1 else max(1, (os.cpu_count() or 1) // slots)
    return slots, threads


def seeds_note(plan: Plan) -> str | None:
    """A line when the plan runs seeds the table does not list (`--seeds 9` on a 5-seed table)."""
    extra = sorted({r.seed for r in plan.runs} - set(plan.table.seeds))
    if not extra:
        return None
    listed = ",".join(str(s) for s in plan.table.seeds)
    return (
        f"note: {plan.table.table} lists seeds {listed}; also running seeds "
        f"{','.join(str(s) for s in extra)} (give an explicit list with --seeds 0,3,7)"
    )


def threads_note(outcomes: dict[str, Outcome], runs_root: Path) -> str | None:
    """A line when a sweep reused finished CPU runs trained at other torch thread counts than
    the runs it trained itself (their run ids are the same: the count is a speed setting):
    their numbers differ in the last digits, and the report marks the cells that mix them."""
    from fedbench.report.collect import cpu_threads

    counts: dict[bool, dict[int, int]] = {True: {}, False: {}}  # cached -> count -> runs
    for run_id, outcome in outcomes.items():
        if outcome.status != "completed":
            continue
        with contextlib.suppress(OSError, BadFile):
            threads = cpu_threads(RunFolder(child_folder(runs_root, run_id)).read_summary())
            if threads is not None:
                mine = counts[outcome.cached]
                mine[threads] = mine.get(threads, 0) + 1
    reused, trained = counts[True], counts[False]
    if not reused or not trained or set(reused) == set(trained):
        return None

    def text(by_count: dict[int, int]) -> str:
        return " and ".join(
            f"{n} at {t} thread{'s' * (t != 1)}" for t, n in sorted(by_count.items())
        )

    return (
        f"note: this sweep reused finished runs trained at other torch thread counts ({text(reused)}) "
        f"than the runs it trained ({text(trained)}); results differ in their last digits between "
        "counts, and the report marks the cells that mix them (mixed threads)"
    )


def write_json_plan(plan: Plan, path: Path) -> None:
    """The plan as one JSON file: table, preset, --set, and per run its cell, seed, run id and
    resolved run config (`fedbench run ... --dry-run --write-plan plan.json`)."""
    if path.parent != Path() and not path.parent.is_dir():
        raise FedbenchError(f"--write-plan {path}: folder {path.parent} does not exist; create it")
    if path.is_dir():
        raise FedbenchError(f"--write-plan {path} is a folder; give the path of a file to write")
    if path.exists() and not path.is_file():  # /dev/null: never replaced by a regular file
        raise FedbenchError(
            f"--write-plan {path} is not a regular file; give the path of a file to write"
        )
    try:
        write_json_atomic(path, _plan_record(plan))
    except OSError as exc:  # /proc/version: its folder takes no new file (ENOENT)
        if disk_error_line(exc) is not None:
            raise  # a full or read-only disk: the CLI's line says what to do
        raise FedbenchError(
            f"--write-plan {path}: cannot write it ({exc.strerror}); give the path of a file in "
            "a writable folder"
        ) from None


def _plan_record(plan: Plan) -> dict[str, Any]:
    return {
        "name": plan.name,
        "table": plan.table.table,
        "preset": plan.preset,
        "overrides": plan.overrides,
        "client_steps": plan.client_steps(),
        "runs": [
            {
                "method": run.method,
                "setting": run.setting,
                "seed": run.seed,
                "run_id": run.run_id,
                "client_steps": run.client_steps(),
                "config": run.cfg.to_dict(),
            }
            for run in plan.runs
        ],
    }


def write_plan(plan: Plan, folder: Path, outcomes: dict[str, Outcome] | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(folder)
    previous = {}
    # None yet, or a bad one (fedbench.readback): then statuses start from this sweep's outcomes.
    with contextlib.suppress(OSError, BadFile):
        previous = {r["run_id"]: r for r in read_plan_file(folder / PLAN_FILE)["runs"]}
    runs = []
    for run in plan.runs:
        record = {
            "method": run.method,
            "setting": run.setting,
            "seed": run.seed,
            "run_id": run.run_id,
        }
        outcome = (outcomes or {}).get(run.run_id)
        if outcome is not None:
            record.update(status=outcome.status, reason=outcome.error)
        elif run.run_id in previous:
            record.update(
                status=previous[run.run_id].get("status"), reason=previous[run.run_id].get("reason")
            )
        else:
            record.update(status="planned", reason=None)
        runs.append(record)
    write_json_atomic(
        folder / PLAN_FILE,
        {
            "table": plan.table.model_dump(mode="json"),
            "preset": plan.preset,
            "overrides": plan.overrides,
            "tuned": plan.tuned,
            "tuned_on": plan.tuned_on,
            "fingerprint": plan_fingerprint(plan),
            "runs": runs,
        },
    )


def resume_lines(plan: Plan, out: Path, shown: int = 5) -> list[str]:
    """'resuming RUN from round N (checkpoint of TIME)' for each unfinished run of the plan with
    a checkpoint in OUT: the first `shown` of them, then one line summing up the rest."""
    lines = []
    for run_id in dict.fromkeys(r.run_id for r in plan.runs):
        folder = RunFolder(child_folder(out / "runs", run_id))
        if folder.is_finished():
            continue
        line = folder.resuming_line()
        if line is not None:
            lines.append(line)
    if len(lines) > shown:
        rest = len(lines) - shown
        lines = [
            *lines[:shown],
            f"... and {rest} more run{'s' * (rest != 1)} resuming from checkpoints",
        ]
    return lines


def run_sweep(
    plan: Plan,
    out: Path,
    *,
    workers: int | None = None,
    console: Console | None = None,
    launcher: Literal["local", "ray"] = "local",
    ray_address: str | None = None,
    report: bool = False,
) -> SweepResult:
    """Run every planned run into OUT/runs/ and record the outcomes in OUT/<table>[-<preset>]/
    (or, while a sweep of another plan holds that folder, OUT/<table>[-<preset>]-<fingerprint>/:
    fedbench.runner.report_folder); with `report`, also build the report there (`result.report`)
    before letting the folder go. A dataset or pretrained weights missing for an unfinished run
    stop it first (exit code 2)."""
    if launcher == "local":
        check_runs_here(plan)
    require_resources(plan, out)
    folder = child_folder(out, plan.name)
    if console is not None:
        for line in resume_lines(plan, out):
            console.print(line, highlight=False, soft_wrap=True)

    def say(line: str) -> None:
        if console is not None:
            console.print(line, highlight=False, soft_wrap=True, markup=False)

    with claim_report_folder(folder, plan, lambda claimed: write_plan(plan, claimed), say) as held:
        if launcher == "ray":
            from fedbench.runner.ray_launcher import launch_ray

            outcomes = launch_ray(plan, out, address=ray_address, console=console)
        else:
            outcomes = launch(plan, out, workers=workers, console=console)
        write_plan(plan, held, outcomes)
        note = threads_note(outcomes, out / "runs")
        if note is not None:
            say(note)
        result = SweepResult(plan, held, outcomes)
        if report:
            from fedbench.report import build_report

            result.report = build_report(held, out / "runs")
    return result
