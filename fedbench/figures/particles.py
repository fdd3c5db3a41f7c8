"""Many independent federations ("particles") of one registered algorithm, stacked as the rows of
a leading dimension, so that a simulation of thousands of them (the escape-rate figure,
fedbench.figures.escape_rate) drives the engine's round protocol once per round, not once per
particle.

Each particle is its own model: the client hooks and local steps are elementwise over the
rows, as on the vectorised engine's stacked clients, but a server rule may read the whole model
(FedAdamom's beta1 compares each coordinate's v with the mean of v over the model). The server
rule therefore runs under torch.func.vmap over the rows, so that every statistic it takes stays
the particle's own. vmap has no batching rule for torch._foreach_* ops, which the rules are
written in: under `ForeachPerTensor` each runs as its one-tensor op, the in-place ones as the
out-of-place op and a copy (vmap batches these; the in-place ternary ops would fall back to a
per-row loop). On the CPU a foreach op is that same loop of one-tensor ops, so a particle's
server step is bitwise the rule's on its own model (tests/figures/test_escape_rate.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor
from torch.func import vmap
from torch.overrides import TorchFunctionMode

from fedbench.algorithms.base import (
    Algorithm,
    ClientUpload,
    RoundInfo,
    Scalar,
    State,
    Tensors,
    Upload,
)
from fedbench.engine.client_state import map_tensors

_FOREACH = "_foreach_"


def _item(arg: Any, i: int) -> Any:
    """The i-th tensor (or scalar) of a foreach argument; a single scalar for every tensor."""
    return arg[i] if isinstance(arg, list | tuple) else arg


class ForeachPerTensor(TorchFunctionMode):
    """Runs every torch._foreach_* op as one op per tensor of its lists (see the module
    docstring); every other function unchanged."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Sequence[type],
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if not name.startswith(_FOREACH):
            return func(*args, **kwargs)
        op = name[len(_FOREACH) :]
        count = len(args[0])
        if not op.endswith("_"):
            single = getattr(torch, op)
            return [
                single(*_one(op, args, i), **kwargs, **_value(op, args, i)) for i in range(count)
            ]
        out_of_place = None if op == "copy_" else getattr(torch, op[:-1], None)
        for i in range(count):
            target, *rest = _one(op, args, i)
            value = _value(op, args, i)
            if out_of_place is None:  # copy_, zero_: batched in place
                getattr(target, op)(*rest, **kwargs, **value)
            else:
                target.copy_(out_of_place(target, *rest, **kwargs, **value))
        return None


#: Foreach ops whose positional scalars (one per tensor) are the one-tensor op's `value`.
_SCALARS_ARE_VALUE = ("addcmul", "addcdiv")


def _one(op: str, args: Sequence[Any], i: int) -> list[Any]:
    """The one-tensor op's positional arguments for tensor i."""
    if op.rstrip("_") in _SCALARS_ARE_VALUE:
        args = args[:3]
    return [_item(a, i) for a in args]


def _value(op: str, args: Sequence[Any], i: int) -> dict[str, Any]:
    """addcmul/addcdiv's positional scalars as the one-tensor op's `value` keyword."""
    if op.rstrip("_") in _SCALARS_ARE_VALUE and len(args) > 3:
        return {"value": _item(args[3], i)}
    return {}


class Particles(Algorithm):
    """The algorithm `inner` run by P independent federations at once: every tensor (x, y, g,
    uploads, server state) carries the particles along dim 0. Stored client states and local
    states must be elementwise too (the client hooks see all rows at once)."""

    def __init__(self, inner: Algorithm) -> None:
        super().__init__(inner.params, inner.spec, num_clients=inner.num_clients)
        self.inner = inner

    def init_server_state(self, x: Tensors) -> State:
        def init(rows: Tensors) -> State:
            with ForeachPerTensor():
                return self.inner.init_server_state(rows)

        state: State = vmap(init)(x)
        return state

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        """The inner rule on each particle's own model, all particles at once (`per_row`); x
        and the server state are updated in place."""

        def step(rows: tuple[Tensors, dict[str, Tensors], State]) -> None:
            with ForeachPerTensor():
                self.inner.server_update(*rows, info)

        per_row(step, (x, mean, server))

    def server_update_with_uploads(
        self,
        x: Tensors,
        mean: dict[str, Tensors],
        uploads: Sequence[ClientUpload],
        server: State,
        info: RoundInfo,
    ) -> None:
        if self.inner.uses_client_uploads:
            raise NotImplementedError(
                f"{type(self.inner).__name__} reads every upload: not run as particles"
            )
        self.server_update(x, mean, server, info)

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        return self.inner.client_begin(x, server, client_state, info)

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        self.inner.local_step(y, g, local, k, info)

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        return self.inner.client_end(y, x, local, client_state, info)

    def v_block_means(self, local: State) -> Tensor | None:
        return self.inner.v_block_means(local)


def per_row(fn: Callable[[Any], None], tree: Any) -> None:
    """`fn` on each row of the tensors of `tree` (nested lists, tuples and dicts; the rows are
    their leading dim) at once, under torch.func.vmap: `fn` sees each particle's own tensors
    and its in-place updates write into the rows of `tree`. Only the tensors are walked (vmap's
    own walk of the whole tree would refuse its non-tensor leaves)."""
    leaves = list(_tensors(tree))

    def call(*rows: Tensor) -> Tensor:
        each = iter(rows)
        fn(map_tensors(tree, lambda _: next(each)))
        return rows[0]  # vmap wants a tensor out; the updates went into the inputs

    vmap(call)(*leaves)


def _tensors(tree: Any) -> Iterator[Tensor]:
    if isinstance(tree, Tensor):
        yield tree
    elif isinstance(tree, dict):
        for value in tree.values():
            yield from _tensors(value)
    elif isinstance(tree, list | tuple):
        for value in tree:
            yield from _tensors(value)


def select_rows(state: Any, keep: Tensor) -> Any:
    """A (server) state with only the rows `keep` (a boolean mask over the particles)."""
    return map_tensors(state, lambda t: t[keep])
