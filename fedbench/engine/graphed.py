"""The vectorised executor's stacked local step replayed as a CUDA graph (`runtime.cuda_graphs`).

Eager, a stacked step of ResNet-18 launches thousands of small kernels, and on a GPU the host's
launches, not the device, set its speed. Here the whole step (the rows' vmap'd gradients, their
per-row clipping and the rule's `local_step_with_oracle`, fedbench.engine.stacked.stacked_step)
is captured once per shape and replayed every step:

- static buffers: the chunk's stacked weights y, BatchNorm buffers and local state, the batch
  xb / yb (and padding mask) and the step scalars k, eta_{r,k}, r (and sum_k eta_{r,k}) as 0-d
  float64 device tensors. The step reads and writes only them, in place.
- per chunk: its start values are copied in (`load`); per step: its batch is copied in and the
  scalars filled (`feed`: copy_ / fill_ only, no allocation, no host sync), then `replay`;
  after K steps the chunk's ends are copies of the static buffers (the next chunk reuses them).
- one capture per `StaticStep` key: the batch's shape, whether it is padded, the rule and the
  round info's fields other than the scalars (a graph freezes every Python value it saw).

The capture is one seam, `StepReplay`: `CudaReplay` (torch.cuda.CUDAGraph, warm-up on a side
stream as torch documents, then capture) on a GPU; in the CPU tests, `RecordedReplay`
(fedbench.engine.recorded: the step's aten ops recorded once and replayed on the tensors they
read, as a graph replays on the memory it captured, so copy-in code that rebinds a static buffer
fails them), which hold the plumbing bitwise to the eager executor. `EagerReplay` (the step's
Python called again) is what runs after a failed capture. Each one's capture runs the step for
real (the warm-up), so the chunk's start values are loaded again after it. Used where the
execution plan says `cuda_graphs: on` (fedbench.engine.plan): a CUDA, non-private, uncompiled
run whose rule's whole step is capturable.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor
from torch.utils._pytree import tree_flatten, tree_map

from fedbench.algorithms.base import Algorithm, RoundInfo, State


class StepReplay(Protocol):
    """Captures a step (a function of static buffers only) once and replays it."""

    def capture(self, step: Callable[[], None]) -> None:
        """Capture `step`; may run it (a warm-up) and so change the static buffers."""
        ...

    def replay(self) -> None: ...


class CudaReplay:
    """A CUDA graph: warm-up iterations on a side stream (torch's recipe: lazy initialisation,
    cuDNN / cuBLAS workspaces and autotuning happen outside the capture), then the capture into
    the engine's memory pool. Autocast's weight-cast cache is off while capturing, as capture
    requires. Replays of one pool's graphs never overlap (one stream), so they share it."""

    def __init__(self, pool: Any, warmup: int = 3) -> None:
        self.pool, self.warmup = pool, warmup
        self.graph: torch.cuda.CUDAGraph | None = None

    def capture(self, step: Callable[[], None]) -> None:
        graph = torch.cuda.CUDAGraph()
        with torch.autocast("cuda", enabled=False, cache_enabled=False):
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(self.warmup):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(graph, pool=self.pool):
                step()
        self.graph = graph

    def replay(self) -> None:
        assert self.graph is not None, "replay before capture"
        self.graph.replay()


class EagerReplay:
    """The step run eagerly on the static buffers: capture runs it once, as the warm-up does; a
    replay calls it again. Given its `step`, it is what runs after a failed capture
    (`StepGraphs.fallback`). Not a stand-in for a graph: its replay reruns the step's Python, so
    it reads a rebound buffer that a graph would miss (fedbench.engine.recorded)."""

    def __init__(self, step: Callable[[], None] | None = None) -> None:
        self.step = step

    def capture(self, step: Callable[[], None]) -> None:
        step()
        self.step = step

    def replay(self) -> None:
        assert self.step is not None, "replay before capture"
        self.step()


def _copy_(static: Any, values: Any) -> None:
    """Copy the tensors of `values` into those of `static` (same structure), in place."""
    for s, v in zip(tree_flatten(static)[0], tree_flatten(values)[0], strict=True):
        if isinstance(s, Tensor):
            s.copy_(v)


def _clone(tree: Any) -> Any:
    return tree_map(lambda t: t.clone() if isinstance(t, Tensor) else t, tree)


def _layout(tree: Any) -> Hashable:
    """What a capture freezes of a pytree: its structure, tensors' shapes and dtypes, and the
    values of its other leaves."""
    leaves, spec = tree_flatten(tree)
    shapes = tuple(
        (tuple(t.shape), t.dtype) if isinstance(t, Tensor) else ("value", repr(t)) for t in leaves
    )
    return str(spec), shapes


@dataclass
class StaticStep:
    """The static buffers of one captured stacked step and its replay (module docstring)."""

    y: list[Tensor]
    buffers: dict[str, Tensor]
    local: State
    xb: Tensor
    yb: Tensor
    mask: Tensor | None
    #: k, eta_{r,k}, r and (where the info has one) sum_k eta_{r,k}: 0-d float64 tensors.
    scalars: dict[str, Tensor]
    replay: StepReplay
    captured: bool = False

    def load(
        self, y: list[Tensor], buffers: dict[str, Tensor], local: State, mask: Tensor | None
    ) -> None:
        """A chunk's start values into the static buffers."""
        torch._foreach_copy_(self.y, y)
        for name, b in self.buffers.items():
            b.copy_(buffers[name])
        _copy_(self.local, local)
        if self.mask is not None and mask is not None:
            self.mask.copy_(mask)

    def feed(self, xb: Tensor, yb: Tensor, k: int, info: RoundInfo) -> None:
        """Local step k's batch and scalars into the static buffers: copies and fills only (no
        allocation, no host sync)."""
        self.xb.copy_(xb)
        self.yb.copy_(yb)
        values = {"k": k, "lr": info.lr, "round": info.round, "lr_total": info.lr_total}
        for name, scalar in self.scalars.items():
            value = values[name]
            if isinstance(value, Tensor):
                scalar.copy_(value)
            else:
                assert value is not None  # the key holds whether lr_total is None
                scalar.fill_(value)

    def ends(self) -> tuple[list[Tensor], dict[str, Tensor], State]:
        """The chunk's end values, copied out of the static buffers (which the next chunk of
        this shape overwrites)."""
        return [t.clone() for t in self.y], _clone(self.buffers), _clone(self.local)

    def leaves(self) -> list[Any]:
        return [*self.y, *self.buffers.values(), *tree_flatten(self.local)[0]]


#: A step on a static step's buffers, with its info's scalars replaced by theirs:
#: f(y, buffers, local, xb, yb, mask, k, info) -> None (fedbench.engine.stacked.stacked_step).
StepFunction = Callable[
    [list[Tensor], dict[str, Tensor], State, Tensor, Tensor, "Tensor | None", Tensor, RoundInfo],
    None,
]


@dataclass
class StepGraphs:
    """An engine's captured stacked steps, one `StaticStep` per key (module docstring)."""

    make_replay: Callable[[], StepReplay]
    steps: dict[Hashable, StaticStep] = field(default_factory=dict)
    #: `runtime.cuda_graphs on`: a capture that fails is an error; auto: the steps then run
    #: eagerly on the static buffers, and `fallback` says why (summary.json, a printed note).
    strict: bool = False
    fallback: str | None = None
    #: Graphs captured and replays made (what the CUDA test and the bench read).
    captured: int = 0
    replays: int = 0

    def begin(
        self,
        algorithm: Algorithm,
        y: list[Tensor],
        buffers: dict[str, Tensor],
        local: State,
        xb: Tensor,
        yb: Tensor,
        mask: Tensor | None,
        info: RoundInfo,
    ) -> StaticStep:
        """The static step of a chunk (created on first use) with the chunk's start values."""
        frozen = dataclasses.replace(info, lr=0.0, round=0, lr_total=None)
        key = (
            id(algorithm),
            tuple(xb.shape),
            xb.dtype,
            tuple(yb.shape),
            mask is None,
            info.lr_total is None,
            frozen,
            _layout(local),
            tuple((name, tuple(b.shape)) for name, b in buffers.items()),
        )
        static = self.steps.get(key)
        if static is None:
            device = y[0].device
            names = ["k", "lr", "round"] + ([] if info.lr_total is None else ["lr_total"])
            static = StaticStep(
                y=[t.clone() for t in y],
                buffers=_clone(buffers),
                local=_clone(local),
                xb=torch.empty_like(xb),
                yb=torch.empty_like(yb),
                mask=None if mask is None else torch.empty_like(mask),
                scalars={n: torch.zeros((), dtype=torch.float64, device=device) for n in names},
                replay=self.make_replay(),
            )
            self.steps[key] = static
        static.load(y, buffers, local, mask)
        return static

    def step(
        self,
        static: StaticStep,
        step: StepFunction,
        algorithm: Algorithm,
        start: tuple[list[Tensor], dict[str, Tensor], State],
        xb: Tensor,
        yb: Tensor,
        k: int,
        info: RoundInfo,
    ) -> None:
        """Local step k on the static buffers: feed, capture on the key's first step (then load
        the chunk's `start` values again: the capture ran the step), replay."""
        static.feed(xb, yb, k, info)
        if not static.captured:
            s = static.scalars
            tensors = dataclasses.replace(
                info, lr=s["lr"], round=s["round"], lr_total=s.get("lr_total")
            )
            before = static.leaves()

            def run() -> None:
                step(static.y, static.buffers, static.local, static.xb, static.yb, static.mask,
                     s["k"], tensors)  # fmt: skip

            if self.fallback is None:
                try:
                    static.replay.capture(run)
                except RuntimeError as exc:  # CUDA's capture errors (torch.AcceleratorError)
                    if self.strict:
                        raise
                    first = (str(exc).strip().splitlines() or [""])[0][:200]
                    self.fallback = f"capturing the stacked step failed ({first})"
            if self.fallback is not None:
                static.replay = EagerReplay(run)
            else:
                _check_in_place(algorithm, before, static.leaves())
                self.captured += 1
            static.captured = True
            static.load(*start, None)  # undo the warm-up's steps
        static.replay.replay()
        self.replays += 1


def _check_in_place(algorithm: Algorithm, before: list[Any], after: list[Any]) -> None:
    """A graph replays on the tensors it captured: a rule that rebinds its state (or weights)
    instead of updating them in place would leave the static buffers behind."""
    if len(after) != len(before) or any(
        a is not b if isinstance(b, Tensor) else a != b for a, b in zip(after, before, strict=False)
    ):
        raise RuntimeError(
            f"{type(algorithm).__name__}'s local step rebinds its tensors instead of updating "
            "them in place: it cannot be replayed as a CUDA graph"
        )


def cuda_step_graphs(strict: bool) -> StepGraphs:
    """Step graphs on the current CUDA device, sharing one memory pool (`CudaReplay`)."""
    pool = torch.cuda.graph_pool_handle()
    return StepGraphs(lambda: CudaReplay(pool), strict=strict)
