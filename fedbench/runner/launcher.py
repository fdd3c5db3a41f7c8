"""The local launcher: a process pool that runs a plan's runs, one run per task.

Workers: one per GPU, else one per CPU core with one torch thread each (so that the workers do not
oversubscribe the cores). Runs already finished in OUT are skipped by the engine, interrupted ones
resume from their checkpoint; a failed or diverged run never stops the sweep. A run whose config
the engine refuses before writing anything (a feature not implemented yet, e.g. `blocks: hessian`)
is recorded as `unsupported` with the reason, and its cell says so in the report.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from fedbench.runner.table_config import Plan, PlannedRun

#: Outcomes of one run in a sweep.
OK_STATUSES = ("completed", "unsupported")


@dataclass
class Outcome:
    run_id: str
    status: str  # completed | diverged | failed | unsupported
    error: str | None = None
    wall_s: float = 0.0
    cached: bool = False  # finished by an earlier sweep
    test_acc: float | None = None


def default_workers() -> tuple[int, int, list[str]]:
    """(workers, torch threads per worker, GPU ids to pin): one per GPU, else one per core."""
    import torch

    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        return count, max(1, (os.cpu_count() or 1) // count), [str(i) for i in range(count)]
    return max(1, os.cpu_count() or 1), 1, []


_GPU_SLOTS: Any = None


def _init_worker(threads: int, gpu_slots: Any) -> None:
    if gpu_slots is not None:
        # Pin this worker to one GPU before torch initialises CUDA.
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu_slots.get()
    import torch

    torch.set_num_threads(threads)


def run_one(cfg_data: dict[str, Any], out: str) -> Outcome:
    """Train one run (in a worker): never raises, the outcome says what happened."""
    from fedbench.config import parse_run_config
    from fedbench.engine import train
    from fedbench.engine.run_folder import RunFolder
    from fedbench.errors import FedbenchError

    cfg = parse_run_config(cfg_data)
    run_id = cfg.run_id()
    t0 = time.perf_counter()
    try:
        result = train(cfg, Path(out), console=None)
    except FedbenchError as exc:
        summary = RunFolder.for_config(Path(out), cfg).read_summary()
        if summary is None:  # refused before anything was written
            return Outcome(run_id, "unsupported", str(exc))
        return Outcome(run_id, "failed", summary.get("error") or str(exc))
    except Exception as exc:
        return Outcome(run_id, "failed", f"{type(exc).__name__}: {exc}")
    summary = result.summary
    status = summary.get("status", result.status)
    return Outcome(
        run_id,
        status,
        summary.get("error"),
        wall_s=time.perf_counter() - t0,
        cached=result.status == "skipped",
        test_acc=(summary.get("final") or {}).get("test_acc"),
    )


class SweepProgress:
    """Runs done / running / failed and an ETA: a rich bar on a terminal, plain lines otherwise."""

    def __init__(self, console: Console | None, total: int, workers: int, label: str) -> None:
        self.console, self.total, self.workers, self.label = console, total, workers, label
        self.done = self.failed = self.cached = 0
        #: Seconds spent on runs that trained: the ETA's rate ignores already-finished runs.
        self.trained_s = 0.0
        self.rich: Progress | None = None
        if console is not None and console.is_terminal:
            self.rich = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} runs"),
                TextColumn("{task.fields[counts]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=console,
            )
            self.rich.start()
            self.task = self.rich.add_task(label, total=total, counts=self._counts())

    def _counts(self) -> str:
        running = min(self.workers, self.total - self.done)
        cached = f"  already done {self.cached}" if self.cached else ""
        return f"done {self.done}  running {running}  failed {self.failed}{cached}"

    def eta(self) -> str:
        """`  eta N s` from the runs that trained; nothing when none did or none is left (a rerun
        of finished runs has no rate to extrapolate)."""
        trained = self.done - self.cached
        left = self.total - self.done
        if trained == 0 or left == 0:
            return ""
        return f"  eta {self.trained_s / trained * left / min(self.workers, left):.0f} s"

    def update(self, run: PlannedRun, outcome: Outcome) -> None:
        self.done += 1
        self.failed += outcome.status in ("failed", "diverged")
        self.cached += outcome.cached
        if not outcome.cached:
            self.trained_s += outcome.wall_s
        if self.rich is not None:
            # A finished run leaves the bar's total instead of completing in no time, so that
            # rich's remaining-time estimate is the rate of runs that trained.
            total = self.total - self.cached
            self.rich.update(
                self.task, total=total, completed=self.done - self.cached, counts=self._counts()
            )
            return
        if self.console is None:
            return
        where = " ".join(f"{k}={v}" for k, v in run.setting.items())
        acc = f" test_acc {outcome.test_acc:.2f}" if outcome.test_acc is not None else ""
        note = " (already done)" if outcome.cached else ""
        reason = f": {outcome.error}" if outcome.status != "completed" and outcome.error else ""
        self.console.print(
            f"[{self.done}/{self.total}] {run.method} {where} seed {run.seed}: "
            f"{outcome.status}{note}{acc}{reason}{self.eta()}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )

    def close(self) -> None:
        if self.rich is not None:
            self.rich.stop()


def launch(
    plan: Plan,
    out: Path,
    *,
    workers: int | None = None,
    console: Console | None = None,
) -> dict[str, Outcome]:
    """Run every planned run (each distinct run_id once); return the outcome per run_id."""
    unique: dict[str, PlannedRun] = {}
    for run in plan.runs:
        unique.setdefault(run.run_id, run)
    auto_workers, threads, gpus = default_workers()
    if workers is None:
        workers = auto_workers
    else:
        threads = max(1, (os.cpu_count() or 1) // workers) if not gpus else threads
    workers = max(1, min(workers, len(unique) or 1))
    progress = SweepProgress(console, len(unique), workers, plan.name)
    outcomes: dict[str, Outcome] = {}
    try:
        if workers == 1:
            for run_id, run in unique.items():
                outcome = run_one(run.cfg.to_dict(), str(out))
                outcomes[run_id] = outcome
                progress.update(run, outcome)
        else:
            outcomes = _launch_pool(unique, out, workers, threads, gpus, progress)
    finally:
        progress.close()
    return outcomes


def _launch_pool(
    unique: dict[str, PlannedRun],
    out: Path,
    workers: int,
    threads: int,
    gpus: list[str],
    progress: SweepProgress,
) -> dict[str, Outcome]:
    # spawn: a forked child of a process that loaded torch can deadlock in its thread pools.
    context = multiprocessing.get_context("spawn")
    slots = None
    if gpus:
        slots = context.Manager().Queue()
        for i in range(workers):
            slots.put(gpus[i % len(gpus)])
    outcomes: dict[str, Outcome] = {}
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=context,
        initializer=_init_worker,
        initargs=(threads, slots),
    ) as pool:
        futures: dict[Future[Outcome], PlannedRun] = {
            pool.submit(run_one, run.cfg.to_dict(), str(out)): run for run in unique.values()
        }
        pending = set(futures)
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    run = futures[future]
                    try:
                        outcome = future.result()
                    except Exception as exc:  # the worker process itself died
                        outcome = Outcome(run.run_id, "failed", f"{type(exc).__name__}: {exc}")
                    outcomes[run.run_id] = outcome
                    progress.update(run, outcome)
        except KeyboardInterrupt:
            for future in pending:
                future.cancel()
            raise
    return outcomes
