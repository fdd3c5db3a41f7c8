"""The whole client step as one compiled function (`runtime.compile: true`, sequential engine).

Forward, backward, gradient clipping and the algorithm's local rule are one function of tensors
only, compiled once per run with `torch.compile(fullgraph=True)`:

    step(y, buffers, local, xb, yb, k, lr, round) -> None     (y, buffers, local: in place)

- The gradient is torch.func.grad of the loss through `functional_call` of the one resident
  model on detached aliases of its parameters (so the update lands in the model), with the
  model's BatchNorm statistics updated in place, as an eager step updates them.
- The step scalars k, eta_{r,k} and r are 0-d float64 tensors on the device (`torch.full`, a
  kernel argument: no copy from the host, no sync), so neither the compiled graph nor a CUDA
  graph replaying it freezes them, and nothing recompiles from one step, round or lr schedule
  value to the next. The local rules take them as `fedbench.algorithms.base.Scalar`
  (`Algorithm.capturable_step`).
- Batches are drawn, augmented and prepared outside the step (they consume the client's
  generator in the eager order), so a captured run draws exactly the batches an eager run does.

Used where `captured_unsupported` is None: a non-private run whose algorithm declares
`capturable_step` and uses no gradient oracle of its own (two gradients per step), no
representation term and no full-gradient pass; otherwise `runtime.compile` compiles the
model's forward only, as before. The compiled step equals the eager one up to float rounding
(tests/engine/test_captured.py: float64, dropout-free models; with dropout the compiled graph
draws its own masks).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import grad

from fedbench.algorithms.base import Algorithm, RoundInfo, Scalar, State
from fedbench.algorithms.full_gradient import uses_full_gradient
from fedbench.algorithms.representation import uses_representation
from fedbench.step import Objective, autocast_context, clip_by_norm_, split_model


def device_scalar(value: Scalar, device: torch.device) -> Tensor:
    """A step scalar as a 0-d float64 device tensor (a fill kernel: no host copy); one that is
    a tensor already is moved (a no-op where it is one on the device)."""
    if isinstance(value, Tensor):
        return value.to(device=device, dtype=torch.float64)
    return torch.full((), value, dtype=torch.float64, device=device)


def step_scalars(k: int, info: RoundInfo, device: torch.device) -> tuple[Tensor, RoundInfo]:
    """Local step k and the step's RoundInfo (`RoundInfo.at_step(k)`) with k, eta_{r,k} and r
    as 0-d device tensors: what a compiled step takes, so that its graph freezes no value."""
    tensors = dataclasses.replace(
        info, lr=device_scalar(info.lr, device), round=device_scalar(info.round, device)
    )
    return device_scalar(k, device), tensors


def captured_unsupported(algorithm: Algorithm, private: bool) -> str | None:
    """Why a run cannot compile its whole client step (None: it can)."""
    name = type(algorithm).__name__
    if private:
        return "per-sample clipping (DP) is not captured"
    if not algorithm.capturable_step:
        return f"{name}'s local rule takes its step scalars as Python numbers"
    if type(algorithm).local_step_with_oracle is not Algorithm.local_step_with_oracle:
        return f"{name} computes several gradients per step"
    if uses_representation(algorithm) or uses_full_gradient(algorithm, algorithm.params):
        return f"{name} adds a pass outside the step (representation or full gradient)"
    return None


def fixed_for_the_run(guards: list[Any]) -> list[bool]:
    """Keep the guards on the step's arguments, drop those on the step's owner (`self`).

    Every call of a compiled function first checks its guards; a model's module tree and the
    algorithm's hyperparameters are hundreds of them (measured on the CPU: 394 us of a 4 ms
    step for the 2-layer cnn), yet they cannot change within a run: the model, its mode
    (training), its frozen weights, the algorithm, the clip and the precision are fixed when
    the step is built. The guards on the arguments (tensor shapes and dtypes, the local state's
    structure, RoundInfo's integers) stay, so a new batch shape or K_i still recompiles.
    Only safe for a function compiled through `compile_per_owner`: its graphs are never
    offered to another owner (another run in the same process, with other hyperparameters)."""
    return [not (g.name == "self" or g.name.startswith(("self.", "self["))) for g in guards]


def compile_per_owner(method: Callable[..., Any], dynamic: bool | None = None) -> Any:
    """torch.compile(fullgraph=True) of a bound method whose graphs belong to its object only.

    Dynamo keeps compiled graphs on the function's code object, which every instance of a
    class shares; with the owner's guards dropped (`fixed_for_the_run`), a second run in the
    same process (a sweep trains runs one after the other) would replay the first run's graph,
    its hyperparameters baked in. A copy of the code object per owner gives each its own
    cache."""
    # mypy types a bound method as a plain callable (no __func__ / __self__): it is a MethodType.
    func = method.__func__  # type: ignore[attr-defined]
    code = func.__code__.replace()  # a new code object: a cache of its own
    own = types.FunctionType(code, func.__globals__, func.__name__, func.__defaults__,
                             func.__closure__)  # fmt: skip
    bound = types.MethodType(own, method.__self__)  # type: ignore[attr-defined]
    # guard_filter_fn arrived with torch 2.8 (with these helpers); before it, all guards stay.
    filtering = hasattr(torch.compiler, "skip_guard_on_all_nn_modules_unsafe")
    options: dict[str, str | int | bool | Callable[..., Any]] | None = (
        {"guard_filter_fn": fixed_for_the_run} if filtering else None
    )
    return torch.compile(bound, fullgraph=True, dynamic=dynamic, options=options)


class CompiledOrEager:
    """A compiled step that falls back, for good, to its eager twin when compiling fails.

    Compiling happens before the graph runs, so a failed compile has changed nothing and the
    eager twin (the same function: exact to rounding) takes the same call. Seen on the CPU with
    torch 2.14: inductor's C++ loop fusion fails (KeyError in `try_outer_loop_fusion_with_
    local_buf`) on the vectorised step of the digits CNN with padded batches. `fallback` says
    why (None while compiled); `on_fallback` hears it once."""

    def __init__(
        self,
        compiled: Callable[..., Any],
        eager: Callable[..., Any],
        on_fallback: Callable[[str], None] | None = None,
    ) -> None:
        self.compiled, self.eager, self.on_fallback = compiled, eager, on_fallback
        self.fallback: str | None = None

    def __call__(self, *args: Any) -> Any:
        if self.fallback is None:
            try:
                return self.compiled(*args)
            except torch._dynamo.exc.TorchDynamoException as exc:
                first = (str(exc).strip().splitlines() or [""])[0][:200]
                self.fallback = f"compiling the step failed ({type(exc).__name__}: {first})"
                if self.on_fallback is not None:
                    self.on_fallback(self.fallback)
        return self.eager(*args)


class CapturedStep:
    """One local step of the resident model as one compiled function (module docstring)."""

    def __init__(
        self,
        model: nn.Module,
        algorithm: Algorithm,
        grad_clip: float | None,
        autocast: torch.dtype | None,
        device: torch.device,
        compile_fn: Callable[..., Any] | None = None,
        objective: Objective | None = None,
    ) -> None:
        self.model = model
        self.algorithm = algorithm
        self.grad_clip = grad_clip
        self.autocast = autocast
        self.device = device
        self.objective = objective or Objective()
        self.split = split_model(model)
        self.names = self.split.names
        params = dict(model.named_parameters())
        #: Aliases of the trainable parameters: updated in place, the model's weights change.
        self.y = [params[n].detach() for n in self.names]
        self.buffer_names = self.split.buffer_names
        self.buffers = self.split.buffers(model)
        # dynamic=None: a second batch shape (a client's last, smaller batch) recompiles once
        # with a dynamic batch dimension instead of once per shape.
        self.step = CompiledOrEager((compile_fn or compile_per_owner)(self.eager_step),
                                    self.eager_step)  # fmt: skip

    def _loss(
        self, params: dict[str, Tensor], buffers: dict[str, Tensor], xb: Tensor, yb: Tensor
    ) -> Tensor:
        return self.objective.functional(self.model, self.split, params, buffers, xb, yb)

    def eager_step(
        self,
        y: list[Tensor],
        buffers: list[Tensor],
        local: State,
        xb: Tensor,
        yb: Tensor,
        k: Tensor,
        info: RoundInfo,
    ) -> None:
        """The step itself (what is compiled): gradient at y, clipped, then the local rule."""
        params = dict(zip(self.names, y, strict=True))
        with autocast_context(self.device.type, self.autocast, cache=False):
            found = grad(self._loss)(
                params, dict(zip(self.buffer_names, buffers, strict=True)), xb, yb
            )
        g = [found[name] for name in self.names]
        clip_by_norm_(g, self.grad_clip)
        with torch.no_grad():
            self.algorithm.local_step(y, g, local, k, info)

    def __call__(self, local: State, xb: Tensor, yb: Tensor, k: int, info: RoundInfo) -> None:
        """Local step k (1-based) of the client whose state is `local`, with `info` the step's
        own RoundInfo (`RoundInfo.at_step(k)`: its lr is eta_{r,k})."""
        k_tensor, tensor_info = step_scalars(k, info, self.device)
        self.step(self.y, self.buffers, local, xb, yb, k_tensor, tensor_info)
