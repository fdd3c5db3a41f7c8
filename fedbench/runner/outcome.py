"""What became of one run of a sweep: the launchers return it, the progress line and the
report read it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Outcome:
    run_id: str
    status: str  # completed | diverged | failed | unsupported (| busy, inside the launcher)
    error: str | None = None
    wall_s: float = 0.0
    cached: bool = False  # finished by an earlier sweep, or by a concurrent one
    test_acc: float | None = None
    attempts: int = 1  # how often this sweep started the run
    gpu: str | None = None  # CUDA_VISIBLE_DEVICES of the worker that ran it
    node: str | None = None  # the Ray node that ran it (the first 8 hex digits of its id)
    together: int = 1  # runs trained in the same computation (runtime.seeds_together)
