"""One run from its config: pick the engine, run it in its run folder, write the summary."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from fedbench.config import RunConfig
from fedbench.data.partition import write_partition
from fedbench.engine.checkpoint import remove_checkpoint
from fedbench.engine.loggers import check_loggers, open_loggers
from fedbench.engine.loop import Engine
from fedbench.engine.plan import ExecutionPlan, execution_plan
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.setup import RunSetup, prepare_run
from fedbench.engine.vectorized import VectorizedEngine
from fedbench.errors import FedbenchError
from fedbench.files import remove_stale_temporaries
from fedbench.threads import threads_for_run


@dataclass
class RunResult:
    run_dir: Path
    status: str  # completed | diverged | failed | skipped (already finished)
    summary: dict[str, Any]


def select_engine(
    setup: RunSetup,
    folder: RunFolder,
    console: Console | None,
    plan: ExecutionPlan | None = None,
) -> Engine:
    """The engine built from the run's execution plan (`plan`, or the one made for `setup`),
    which falls back to the sequential engine where the vectorised one cannot run the run, with
    the reason; the plan goes into summary.json."""
    plan = plan if plan is not None else execution_plan(setup)
    executor = plan["executor"]
    if executor.fallback:
        why = executor.reason.removeprefix("vectorized asked, but ")
        (console or Console(stderr=True)).print(
            f"note: runtime.engine vectorized is not available because {why}; "
            "using the sequential engine",
            highlight=False,
            soft_wrap=True,
        )
    cls = VectorizedEngine if plan.executor == "vectorized" else Engine
    return cls(plan, setup, folder, console)


def train(
    cfg: RunConfig,
    out: Path,
    *,
    save_model: bool = False,
    console: Console | None = None,
    wait: bool = True,
) -> RunResult:
    """Run (or resume, or skip if finished) the configured federation under out/runs/<run_id>/.

    The run folder's lock is held while training, so two processes given the same run train it
    once: the second waits and then skips it (with `wait=False` it raises RunBusyError instead).
    """
    folder = RunFolder.for_config(out, cfg)
    if folder.is_finished():
        return finished_run(folder, save_model)
    threads_for_run(cfg.runtime.threads)  # before the data and model are built
    setup = prepare_run(cfg)  # every user error is raised here, before anything is written
    plan = execution_plan(setup, group=1)  # (and here: a CUDA graph that cannot run)
    check_loggers(cfg.runtime.loggers)
    with folder.lock(wait=wait):
        if folder.is_finished():  # another process finished it while we waited
            return finished_run(folder, save_model)
        return train_locked(setup, folder, save_model, console, plan)


def finished_run(folder: RunFolder, save_model: bool) -> RunResult:
    """A finished run, read back: what a kill after its summary left is cleaned up (its
    checkpoint, temporaries), and a model.pt asked for must be there and readable."""
    summary = folder.read_summary() or {}
    remove_checkpoint(folder.checkpoint)
    remove_stale_temporaries(folder.path)
    if save_model and summary.get("status") == "completed":
        problem = model_problem(folder.model)
        if problem is not None:
            raise FedbenchError(
                f"run {folder.path.name} is finished, but its model.pt {problem}, and the final "
                f"weights are kept only in model.pt; remove {folder.path} and rerun with "
                "--save-model to train it again"
            )
    return RunResult(folder.path, "skipped", summary)


def model_problem(path: Path) -> str | None:
    """Why model.pt at `path` is not a readable state dict (None: it is)."""
    if not path.is_file():
        return "is missing" if not path.exists() else "is not a file"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated, or not a torch file
        return f"is unreadable ({type(exc).__name__})"
    return None if isinstance(state, dict) else "holds no state dict"


def open_run(
    setup: RunSetup,
    folder: RunFolder,
    save_model: bool,
    console: Console | None,
    engine: Engine | None = None,
    plan: ExecutionPlan | None = None,
) -> Engine:
    """Make the (locked) run folder ready to train in: bad files set aside, config, attempt and
    partition written, loggers opened; returns the engine (`engine`, or the one built from the
    run's execution plan) with its model file set."""
    cfg = setup.cfg
    folder.set_aside_bad_files()
    folder.create(cfg, setup.data.source)
    folder.start_attempt()
    write_partition(
        folder.partition,
        setup.partition_arrays,
        setup.data.y_train.cpu().numpy(),
        setup.data.num_classes,
    )
    engine = engine if engine is not None else select_engine(setup, folder, console, plan)
    engine.model_file = folder.model if save_model else None
    folder.loggers = open_loggers(cfg.runtime.loggers, folder.path, cfg.to_dict())
    return engine


def record_failure(folder: RunFolder, exc: BaseException) -> None:
    """Write the `failed` summary of a run whose training raised `exc`."""
    summary = {
        "run_id": folder.path.name,
        "status": "failed",
        "error": f"{type(exc).__name__}: {exc}",
    }
    # A full disk may refuse this write too: the original error is the one to report.
    with contextlib.suppress(OSError):
        folder.write_summary(summary)


def close_loggers(folder: RunFolder) -> None:
    for logger in folder.loggers:
        logger.close()


def train_locked(
    setup: RunSetup,
    folder: RunFolder,
    save_model: bool,
    console: Console | None,
    plan: ExecutionPlan | None = None,
) -> RunResult:
    engine = open_run(setup, folder, save_model, console, plan=plan)
    try:
        summary = engine.run()
    except Exception as exc:
        record_failure(folder, exc)
        raise
    finally:
        close_loggers(folder)
    return RunResult(folder.path, summary["status"], summary)
