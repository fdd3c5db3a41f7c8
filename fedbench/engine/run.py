"""One run from its config: pick the engine, run it in its run folder, write the summary."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.console import Console

from fedbench.config import RunConfig
from fedbench.data.partition import describe
from fedbench.engine.loop import Engine
from fedbench.engine.run_folder import RunFolder, write_json_atomic
from fedbench.engine.setup import RunSetup, prepare_run
from fedbench.engine.vectorized import VectorizedEngine, vectorized_unsupported


@dataclass
class RunResult:
    run_dir: Path
    status: str  # completed | diverged | failed | skipped (already finished)
    summary: dict[str, Any]


def select_engine(setup: RunSetup, folder: RunFolder, console: Console | None) -> Engine:
    """The engine `runtime.engine` asks for, falling back to the sequential one when needed."""
    if setup.cfg.runtime.engine != "vectorized":
        return Engine(setup, folder, console)
    reason = vectorized_unsupported(setup)
    if reason is not None:
        (console or Console(stderr=True)).print(
            f"note: runtime.engine vectorized is not available because {reason}; "
            "using the sequential engine",
            highlight=False,
            soft_wrap=True,
        )
        return Engine(setup, folder, console)
    return VectorizedEngine(setup, folder, console)


def train(
    cfg: RunConfig, out: Path, *, save_model: bool = False, console: Console | None = None
) -> RunResult:
    """Run (or resume, or skip if finished) the configured federation under out/runs/<run_id>/."""
    folder = RunFolder.for_config(out, cfg)
    if folder.is_finished():
        return RunResult(folder.path, "skipped", folder.read_summary() or {})
    setup = prepare_run(cfg)  # every user error is raised here, before anything is written
    folder.create(cfg)
    write_json_atomic(
        folder.partition,
        describe(setup.partition_arrays, setup.data.y_train.cpu().numpy(), setup.data.num_classes),
    )
    engine = select_engine(setup, folder, console)
    try:
        summary = engine.run()
    except Exception as exc:
        summary = {
            "run_id": folder.path.name,
            "status": "failed",
            "error": f"{type(exc).__name__}: {exc}",
        }
        folder.write_summary(summary)
        raise
    if save_model and summary["status"] == "completed":
        engine._load_global()
        torch.save(setup.model.state_dict(), folder.model)
    return RunResult(folder.path, summary["status"], summary)
