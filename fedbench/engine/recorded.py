"""A CPU stand-in for a CUDA graph that, like one, records a step once and replays what it
recorded (fedbench.engine.graphed's `StepReplay` seam; the CUDA graph is `CudaReplay`).

`EagerReplay` calls the step's Python again at every replay, so it reads whatever the Python
names at that moment: copy-in code that *rebinds* a static buffer (`self.xb = xb`) instead of
copying into it (`self.xb.copy_(xb)`) passes through it, while a CUDA graph, which replays the
kernels it captured on the memory it captured, would train on stale inputs without a word.

`RecordedReplay` closes that gap on the CPU. Its capture runs the step once under a
TorchDispatchMode that records every aten op with its arguments: a tensor made by an earlier
recorded op is recorded as that op's output, any other tensor (the static buffers, the step
scalars, constants) by identity, other values as they are. Its replay runs the recorded ops
again, in order, with no Python of the step: each reads the same tensor objects the capture read
(so it sees what was copied into them since) and the outputs of the ops replayed before it, and
the in-place ops write into the same static buffers. What the capture froze (Python numbers,
shapes, the branches the Python took) stays frozen, as in a graph. The same aten ops on the same
values, in the same order, compute the same bits as the eager step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import TreeSpec, tree_flatten, tree_unflatten


@dataclass(frozen=True)
class _Output:
    """An argument that an earlier recorded op made: the index of that output among all the
    tensors the recorded ops returned, in order."""

    index: int


@dataclass(frozen=True)
class _Call:
    """One recorded aten op: its arguments' leaves (an `_Output`, a tensor read by identity, or
    a plain value) and the structure of (args, kwargs) they fill."""

    func: Any
    leaves: list[Any]
    spec: TreeSpec


class _Recorder(TorchDispatchMode):
    """Runs each dispatched op and keeps it with its arguments and outputs. Every tensor seen is
    held until `program`, so that no two of them share an id."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[Any, tuple[Any, ...], dict[str, Any], Any]] = []

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.seen.append((func, args, kwargs, out))
        return out

    def program(self) -> list[_Call]:
        """The recorded ops, each tensor argument resolved to an earlier op's output or kept as
        the tensor itself (made before the capture, or without an op)."""
        made: dict[int, int] = {}  # id of a tensor an op returned -> its output index
        calls, outputs = [], 0
        for func, args, kwargs, out in self.seen:
            leaves, spec = tree_flatten((args, kwargs))
            resolved = [
                _Output(made[id(leaf)]) if isinstance(leaf, Tensor) and id(leaf) in made else leaf
                for leaf in leaves
            ]
            calls.append(_Call(func, resolved, spec))
            for leaf in tree_flatten(out)[0]:
                if isinstance(leaf, Tensor):
                    made[id(leaf)] = outputs  # an in-place op's output is its input: the same
                    outputs += 1
        return calls


class RecordedReplay:
    """`StepReplay` on the CPU that records once and replays the recorded ops (module
    docstring): a static buffer rebound instead of copied into is read stale, as a CUDA graph
    would read it."""

    def __init__(self) -> None:
        self.calls: list[_Call] | None = None

    def capture(self, step: Callable[[], None]) -> None:
        recorder = _Recorder()
        with recorder:
            step()
        self.calls = recorder.program()

    def replay(self) -> None:
        assert self.calls is not None, "replay before capture"
        outputs: list[Tensor] = []
        # The recorded ops include the backward's own: nothing to differentiate here.
        with torch.no_grad():
            for call in self.calls:
                leaves = [outputs[x.index] if type(x) is _Output else x for x in call.leaves]
                args, kwargs = tree_unflatten(leaves, call.spec)
                out = call.func(*args, **kwargs)
                outputs.extend(t for t in tree_flatten(out)[0] if isinstance(t, Tensor))

    @property
    def ops(self) -> int:
        """How many ops a replay runs (0 before the capture)."""
        return len(self.calls or [])
