"""The sequential engine's hot path: one client's K local steps on the one resident model.

The global weights are copied in place into the resident model (no per-client model or
optimizer objects); batches are drawn one index tensor per local epoch; the local rule is a
foreach tensor function; nothing in the step loop forces a host-device sync.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from fedbench.algorithms.base import Algorithm, GradientOracle, RoundInfo, State, StepOracle
from fedbench.algorithms.representation import RepresentationRule, representation_objective
from fedbench.data import Dataset
from fedbench.data.sampler import BatchOrder, batch_indices, client_seed
from fedbench.engine.aggregation import local_step_sizes
from fedbench.engine.captured import CapturedStep
from fedbench.privacy.mechanism import (
    PoissonBatches,
    PrivateGradient,
    noise_generator,
    poisson_batches,
)
from fedbench.step import Objective, autocast_context, clip_by_norm_


@dataclass(frozen=True)
class LocalTraining:
    """What every client of a run trains with: built once per run by the engine."""

    model: nn.Module
    #: The model's forward, or its torch.compile'd version.
    forward: Callable[[Tensor], Tensor]
    #: The model's trainable parameters, in the algorithm's order.
    params: list[Tensor]
    algorithm: Algorithm
    data: Dataset
    batch_size: int
    seed: int
    grad_clip: float | None
    #: Applied to every batch on the device (normalisation, resizing), or None.
    prepare: Callable[[Tensor], Tensor] | None = None
    autocast: torch.dtype | None = None
    #: Batches in NHWC (the model was converted to channels_last: CUDA convnets).
    channels_last: bool = False
    #: The DP mechanism (per-sample clipping + noise) of a private run, else None.
    private: PrivateGradient | None = None
    #: Poisson sampling of the private batches (privacy.sampling: poisson).
    poisson: bool = False
    #: For a `RepresentationRule` (MOON): x -> (z, a function giving classify(z)) on the
    #: resident model, and the representation under other weights
    #: (fedbench.models.representation; fedbench.algorithms.representation).
    represent_and_classify: Callable[[Tensor], tuple[Tensor, Callable[[], Tensor]]] | None = None
    represent_with: Callable[[list[Tensor], Tensor], Tensor] | None = None
    #: The whole step compiled as one function (`runtime.compile`, fedbench.engine.captured),
    #: or None: the eager step below.
    captured: CapturedStep | None = None
    #: The local objective (fedbench.step.objective).
    objective: Objective = dataclasses.field(default_factory=Objective)


def _batch_order(
    run: LocalTraining, samples: Tensor, local_steps: int, generator: torch.Generator
) -> BatchOrder | PoissonBatches:
    """The K batches of one client: fixed-size batches, or Poisson-sampled ones for a private
    run with `privacy.sampling: poisson`. The generator goes on to augment the batches, if the
    data is augmented: only then is it moved past the batches' draws."""
    advance = run.data.augment is not None
    if run.private is not None and run.poisson:
        rate = run.private.divisor(samples.numel()) / samples.numel()
        return poisson_batches(samples, local_steps, rate, generator, advance)
    return batch_indices(samples, local_steps, run.batch_size, generator, advance)


def _local_loss(
    run: LocalTraining, xb: Tensor, yb: Tensor, local: State, info: RoundInfo
) -> Tensor:
    """The batch's objective, plus a `RepresentationRule`'s term on the representation (MOON:
    fedbench.algorithms.representation, the objective both executors differentiate)."""
    rule, forward, anchors = run.algorithm, run.represent_and_classify, run.represent_with
    if forward is None or anchors is None or not isinstance(rule, RepresentationRule):
        return run.objective.loss(run.forward(xb), yb)
    return representation_objective(rule, run.objective, forward, anchors, xb, yb, local, info)


def full_gradient(
    run: LocalTraining, samples: Tensor, cast: contextlib.AbstractContextManager[object]
) -> list[Tensor]:
    """The gradient of the mean objective over all of a client's samples at the resident
    weights (Mime's grad f_i(x)), in batches of batch_size, clipped like a local step's
    gradient; no augmentation, and the model's buffers (BatchNorm statistics) are restored
    after the pass, so that it changes nothing but the gradient it returns."""
    model, params, data = run.model, run.params, run.data
    saved = [b.detach().clone() for b in model.buffers()]
    total = [torch.zeros_like(p) for p in params]
    # batch_size 0: the client's whole local set is one batch (fl.batch_size's meaning).
    for idx in samples.split(run.batch_size or max(samples.numel(), 1)):
        xb, yb = data.x_train[idx], data.y_train[idx]
        if run.prepare is not None:
            xb = run.prepare(xb)
        if run.channels_last and xb.ndim == 4:
            xb = xb.contiguous(memory_format=torch.channels_last)
        with cast:
            loss = run.objective.loss(run.forward(xb), yb, "sum")
        torch._foreach_add_(total, list(torch.autograd.grad(loss, params)))
    with torch.no_grad():
        for buffer, value in zip(model.buffers(), saved, strict=True):
            buffer.copy_(value)
    torch._foreach_div_(total, float(samples.numel()))
    clip_by_norm_(total, run.grad_clip)
    return total


def _gradient_oracle(
    run: LocalTraining,
    xb: Tensor,
    yb: Tensor,
    local: State,
    info: RoundInfo,
    cast: contextlib.AbstractContextManager[object],
    n_local: int,
    noise: torch.Generator | None,
    samples: Tensor,
    calls: list[int] | None = None,
) -> GradientOracle:
    """g at the current parameters for the batch (xb, yb): privatised (per-sample clipping and
    noise) in a private run, else the clipped gradient of the local loss; and the full
    local-data gradient over the client's `samples` (`full_gradient`). A private gradient adds
    one to `calls[-1]` (the step's count, `check_releases`)."""

    def gradient() -> list[Tensor]:
        if run.private is not None:
            assert noise is not None  # a private run draws its noise from the client's generator
            if calls is not None:
                calls[-1] += 1
            return run.private(xb, yb, n_local=n_local, generator=noise)
        with cast:
            loss = _local_loss(run, xb, yb, local, info)
        grads = list(torch.autograd.grad(loss, run.params))
        clip_by_norm_(grads, run.grad_clip)
        return grads

    return StepOracle(gradient, full=lambda: full_gradient(run, samples, cast))


def _batch(run: LocalTraining, idx: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """The samples `idx` as the step sees them: augmented (drawing from the client's
    generator), prepared on the device, in NHWC for a channels_last model."""
    data = run.data
    xb, yb = data.x_train[idx], data.y_train[idx]
    if data.augment is not None:
        xb = data.augment(xb, generator)
    if run.prepare is not None:
        xb = run.prepare(xb)
    if run.channels_last and xb.ndim == 4:
        xb = xb.contiguous(memory_format=torch.channels_last)
    return xb, yb


def check_releases(algorithm: Algorithm, round_index: int, calls: list[int]) -> None:
    """The private gradients each local step of a client round took (`calls`) against what
    the algorithm declares and the accountant composes (`Algorithm.round_gradients`): a rule
    that privatises more (or other) gradients than it declares would report a wrong epsilon,
    so the run fails instead."""
    declared = {
        g: n
        for g, n in algorithm.round_gradients(round_index, len(calls), algorithm.params).items()
        if n
    }
    taken = dict(Counter(calls))
    if taken != declared:
        name = type(algorithm).__name__
        raise RuntimeError(
            f"{name} privatised {taken} ({{gradients: steps}}) in round {round_index} but "
            f"declares {declared} (round_gradients), which the privacy accountant counts"
        )


def run_client(
    run: LocalTraining,
    *,
    client: int,
    samples: Tensor,
    local: State,
    info: RoundInfo,
    measure_steps: bool = False,
) -> float | None:
    """Train the resident model (already holding the client's start weights) for K steps.

    With `measure_steps` (diagnostic rounds), returns the mean over the K steps of
    RMS(y_k - y_{k-1}) / eta_r, the size of a local step relative to the learning rate (else None).

    With `run.private`, g is the privatised g_tilde (per-sample clipping + noise) and grad_clip
    is not applied on top. Each step goes through `Algorithm.local_step_with_oracle`, which gets
    a function computing g at the current parameters (one call by default; DP-FedSAM: two).
    """
    model, params, algorithm = run.model, run.params, run.algorithm
    private = run.private
    seed, autocast = run.seed, run.autocast
    client_key = client_seed(seed, info.round_index, client)
    generator = torch.Generator().manual_seed(client_key)
    torch.manual_seed(client_key)  # dropout: a function of (seed, round, client) only
    n_local = samples.numel()
    noise = None
    if private is not None:
        noise = noise_generator(samples.device, client_key)
        info = dataclasses.replace(info, grad_noise_std=private.noise_std(n_local))
    order = _batch_order(run, samples, info.local_steps, generator)
    device_type = samples.device.type
    # No weight-cast cache: it lives for one step anyway, and CUDA graph capture needs it off.
    cast = autocast_context(device_type, autocast, cache=False)
    model.train()
    step_sizes: list[Tensor] = []
    #: Private gradients per local step, checked against what the accountant counts.
    calls: list[int] | None = [] if private is not None else None
    for k in range(1, info.local_steps + 1):
        xb, yb = _batch(run, order[k - 1], generator)
        before = [p.detach().clone() for p in params] if measure_steps else None
        if run.captured is not None:
            run.captured(local, xb, yb, k, info.at_step(k))
        else:
            if calls is not None:
                calls.append(0)
            gradient = _gradient_oracle(
                run, xb, yb, local, info, cast, n_local, noise, samples, calls
            )
            algorithm.local_step_with_oracle(params, gradient, local, k, info.at_step(k))
        if before is not None:
            step_sizes.append(local_step_sizes(before, [p.detach() for p in params], None))
    if calls is not None:
        check_releases(algorithm, info.round_index, calls)
    if not measure_steps:
        return None
    return float(torch.stack(step_sizes).mean()) / float(info.lr)  # info.lr: a float here
