"""Seeds trained together (`runtime.seeds_together`): the runs of a table cell that differ only in
`seed`, trained in one process as one stacked computation.

Every seed keeps what its separate run has: its own RunSetup (model initialisation, client
schedule, batches, augmentation generators from its seed), global model, buffers, server and
client states, run folder, metrics, checkpoint and summary: one `VectorizedEngine` per seed.
Each round, all seeds' sampled clients go into one chunk trainer call (fedbench.engine.stacked),
one vmap over seed x client; then each seed ends its own round (aggregation, server step),
evaluates, checks for divergence and a stop request, and checkpoints, as `Engine.run` does for
one run. A seed that diverges or is asked to stop ends alone; the others go on. Each run folder
therefore holds what a separate `runtime.engine: vectorized` run of that seed writes, equal to
float rounding, not bitwise: the stacked step's kernels (one vmap over seed x client: bigger
batched matmuls and grouped convolutions) may sum in another order than the run's own, and
training carries the difference on. `EQUALITY` (summary.json's `seeds_together`) states it with
the measured bound.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from fedbench.engine.loop import RunPass
from fedbench.engine.plan import execution_plan
from fedbench.engine.setup import RunSetup
from fedbench.engine.stacked import stacked_rounds
from fedbench.engine.vectorized import VectorizedEngine
from fedbench.step import split_model

#: How the numbers of a seed trained together relate to its separate run (summary.json's
#: `seeds_together`, beside the group's size): equal to float rounding, never claimed bitwise
#: (the stacked kernels may sum in another order on another device or thread count), with the
#: measured bounds: float64 by tests/engine/test_seeds.py, float32 by
#: benchmarks/seeds_agreement.py (benchmarks/results/seeds-agreement-cpu*.md).
EQUALITY = {
    "equality": "float rounding",
    "measured": "float64: <= 1e-12 relative in metrics and weights (tests); float32, CPU, "
    "1 or 2 threads: 0 (no seed differed; not guaranteed elsewhere); GPU: not measured",
}


def stack_problem(lead: RunSetup, other: RunSetup) -> str | None:
    """Why `other` cannot train stacked with `lead` (None: it can): both must run on the
    vectorised engine, on one device, with the same model structure (parameter and buffer names,
    shapes and dtypes; equal constants) and data of the same shape, and the same local steps."""
    for setup in (lead, other):
        executor = execution_plan(setup)["executor"]
        if executor.value != "vectorized":
            return executor.reason
    if lead.device != other.device:
        return "the runs are on different devices"
    if lead.cfg.fl.local_steps != other.cfg.fl.local_steps:
        return "the runs take different numbers of local steps"
    if type(lead.algorithm) is not type(other.algorithm):
        return "the runs use different algorithms"
    if _signature(lead.model) != _signature(other.model):
        return "the models differ in structure"
    mine, theirs = _constants(lead.model), _constants(other.model)
    if mine.keys() != theirs.keys() or any(not torch.equal(mine[k], theirs[k]) for k in mine):
        return "the models' fixed (non-trained) tensors differ"
    a, b = lead.data, other.data
    if (a.x_train.shape[1:], a.x_train.dtype) != (b.x_train.shape[1:], b.x_train.dtype):
        return "the data sets differ in sample shape"
    return None


def _signature(model: torch.nn.Module) -> list[tuple[str, tuple[int, ...], torch.dtype, bool]]:
    """Name, shape, dtype and trainability of every parameter and buffer."""
    params = [(n, tuple(p.shape), p.dtype, p.requires_grad) for n, p in model.named_parameters()]
    buffers = [(n, tuple(b.shape), b.dtype, False) for n, b in model.named_buffers()]
    return params + buffers


def _constants(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The tensors the vectorised engine passes unstacked (frozen parameters, buffers outside
    the state_dict): the seeds share the lead's, so they must be equal."""
    return split_model(model).constants


def share_data(setups: list[RunSetup]) -> None:
    """Let every setup whose data equals the first's use the first's (one copy on the device
    instead of one per seed; the stacked step then gathers each batch once). The data and the
    partition do not depend on the run seed, so the seeds of a cell normally share."""
    lead = setups[0].data
    for setup in setups[1:]:
        d = setup.data
        if d is not lead and all(
            torch.equal(getattr(lead, name), getattr(d, name))
            for name in ("x_train", "y_train", "x_test", "y_test")
        ):
            setup.data = lead


class SeedsEngine:
    """Trains several runs (the seeds of one cell) together; see the module docstring."""

    def __init__(self, engines: list[VectorizedEngine]) -> None:
        if not engines:
            raise ValueError("SeedsEngine needs at least one run")
        self.engines = engines
        for engine in engines:
            engine.seeds_together = {"group": len(engines), **EQUALITY}

    def run(self) -> list[dict[str, Any]]:
        """Train every seed's remaining rounds (each from its own checkpoint) and write each
        seed's summary; returns the summaries in the engines' order."""
        passes = [engine.begin() for engine in self.engines]
        try:
            for engine, run in zip(self.engines, passes, strict=True):
                engine.first_evaluation(run)
            while active := [
                (engine, run)
                for engine, run in zip(self.engines, passes, strict=True)
                if not run.over
            ]:
                self._round(active)
        finally:
            for run in passes:
                run.progress.close()
        return [engine.end(run) for engine, run in zip(self.engines, passes, strict=True)]

    @staticmethod
    def _round(active: list[tuple[VectorizedEngine, RunPass]]) -> None:
        """One round of every active seed (each at its own next round): the round protocol
        over all their clients, trained in one stacked computation, then each seed's own
        bookkeeping (evaluation, divergence, stop request, checkpoint)."""
        begun = [(engine, run, engine.round_of(*engine.round_plan(run))) for engine, run in active]
        training = [(engine, own) for engine, _, own in begun if own is not None]
        found = stacked_rounds([e for e, _ in training], [own for _, own in training])
        ends = dict(zip([id(e) for e, _ in training], found, strict=True))
        for engine, run, own in begun:
            if own is None:  # every sampled client dropped out: no update this round
                engine.step(run, lambda: None)
            else:
                engine.step(
                    run, functools.partial(engine._after_round, own.results, ends[id(engine)])
                )
