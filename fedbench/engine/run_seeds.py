"""Several runs (the seeds of one table cell) trained in one process: what `train` does for one
run, for each of them, with the runs that can stack trained together (fedbench.engine.seeds).

Each run keeps its own life cycle: a finished run is skipped (only the unfinished seeds train
together), an interrupted one resumes from its own checkpoint, a run whose config is refused
before anything is written is refused alone, a run another process holds is busy alone. Runs
that cannot stack with the others (the vectorised engine does not take them: DP, an algorithm
whose local rule is not elementwise; or a different model or data shape) train one after the
other exactly as `train` trains them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from fedbench.config import RunConfig
from fedbench.engine.loggers import check_loggers
from fedbench.engine.plan import execution_plan
from fedbench.engine.run import (
    RunResult,
    close_loggers,
    finished_run,
    open_run,
    record_failure,
    train_locked,
)
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.seeds import SeedsEngine, share_data, stack_problem
from fedbench.engine.setup import RunSetup, prepare_run
from fedbench.engine.vectorized import VectorizedEngine
from fedbench.threads import threads_for_run

#: What each run of a group came to: its result, or the exception `train` would have raised.
Ended = RunResult | BaseException


def train_together(
    cfgs: list[RunConfig],
    out: Path,
    *,
    save_model: bool = False,
    console: Console | None = None,
    wait: bool = True,
    prepare: Callable[[RunConfig], RunSetup] = prepare_run,
) -> list[Ended]:
    """Train (or resume, or skip) every run of `cfgs` in out/runs/; the runs that can stack
    train together. Returns one entry per config, in order: its RunResult, or the exception
    that ended it (FedbenchError: refused; RunBusyError: another process holds it; else the
    error it failed with, its `failed` summary written). `prepare` builds a run's setup (tests
    build float64 ones)."""
    ended: dict[int, Ended] = {}
    if cfgs:  # the seeds of one cell: one runtime section
        threads_for_run(cfgs[0].runtime.threads)
    folders = [RunFolder.for_config(out, cfg) for cfg in cfgs]
    setups: dict[int, RunSetup] = {}
    for i, (cfg, folder) in enumerate(zip(cfgs, folders, strict=True)):
        try:
            if folder.is_finished():
                ended[i] = finished_run(folder, save_model)
                continue
            setups[i] = prepare(cfg)  # user errors here, before anything is written
            execution_plan(setups[i])  # (and here: a CUDA graph asked for that cannot run)
            check_loggers(cfg.runtime.loggers)
        except Exception as exc:
            ended[i] = exc
            setups.pop(i, None)
    with contextlib.ExitStack() as locks:
        for i in sorted(setups, key=lambda i: folders[i].path.name):  # one order: no deadlock
            try:
                locks.enter_context(folders[i].lock(wait=wait))
            except Exception as exc:
                ended[i] = exc
                del setups[i]
                continue
            if folders[i].is_finished():  # another process finished it while we waited
                ended[i] = finished_run(folders[i], save_model)
                del setups[i]
        stacked, alone = _stackable(setups)
        for i in alone:
            try:
                plan = execution_plan(setups[i], group=1)
                ended[i] = train_locked(setups[i], folders[i], save_model, console, plan)
            except Exception as exc:
                ended[i] = exc
        ended.update(_train_stacked({i: setups[i] for i in stacked}, folders, save_model, console))
    return [ended[i] for i in range(len(cfgs))]


def _stackable(setups: dict[int, RunSetup]) -> tuple[list[int], list[int]]:
    """The runs that train together (those that stack with the first that can stack at all)
    and those trained alone; one run alone is not a stack."""
    stacked: list[int] = []
    for i, setup in setups.items():
        if (not stacked and stack_problem(setup, setup) is None) or (
            stacked and stack_problem(setups[stacked[0]], setup) is None
        ):
            stacked.append(i)
    if len(stacked) < 2:
        stacked = []
    return stacked, [i for i in setups if i not in stacked]


def _train_stacked(
    setups: dict[int, RunSetup],
    folders: list[RunFolder],
    save_model: bool,
    console: Console | None,
) -> dict[int, Ended]:
    """Train the stackable runs as one SeedsEngine; an error fails all of them."""
    if not setups:
        return {}
    share_data(list(setups.values()))
    opened: list[int] = []
    ended: dict[int, Ended] = {}
    try:
        engines = []
        for i, setup in setups.items():
            plan = execution_plan(setup, group=len(setups))
            engine = VectorizedEngine(plan, setup, folders[i], console)
            open_run(setup, folders[i], save_model, console, engine)
            engines.append(engine)
            opened.append(i)
        summaries = SeedsEngine(engines).run()
        for i, summary in zip(setups, summaries, strict=True):
            ended[i] = RunResult(folders[i].path, summary["status"], summary)
    except Exception as exc:
        for i in setups:
            if i in opened:
                record_failure(folders[i], exc)
            ended[i] = exc
    finally:
        for i in opened:
            close_loggers(folders[i])
    return ended
