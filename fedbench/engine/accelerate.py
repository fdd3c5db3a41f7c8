"""The GPU speed settings of a run: `runtime.precision`, channels_last and `runtime.cuda_graphs`.

- precision: fp32 = IEEE float32 everywhere (TF32 off, also for cuDNN convolutions, which
  PyTorch otherwise runs in TF32); tf32 = float32 storage with TF32 matmuls and convolutions on
  CUDA (plain fp32 on a CPU); bf16 = bfloat16 autocast of the forward and backward passes.
- channels_last: convolutional models on CUDA keep weights and batches in NHWC, the layout
  cuDNN's fastest convolution kernels use.
- CUDA graphs: the sequential engine's forward + backward of a (non-private, uncompiled) client
  step is captured once with torch.cuda.make_graphed_callables and replayed for every batch of
  the captured shape (others run eagerly). Only the gradient computation is captured: the local
  rules take Python scalars (learning rate, bias corrections) that a graph would freeze.
  The vectorised engine graphs its whole stacked step, scalars as device tensors, instead
  (fedbench.engine.graphed; not yet measured on a GPU).
  Exercised on an H200 (2026-11-26, `make gpu-check`; docs/performance.md): the cuda tests
  passed and bf16, TF32 and CUDA graphs agreed with fp32 eager. On a CPU `auto` is off.

Which of them a run uses is its execution plan's decision (fedbench.engine.plan); this module
only applies them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn


def apply_precision(precision: str, device: torch.device) -> torch.dtype | None:
    """Set the process' TF32 switches for `precision`; return the autocast dtype (or None)."""
    if device.type == "cuda":
        tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
    return torch.bfloat16 if precision == "bf16" else None


def _float_inputs(module: nn.Module, args: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    return tuple(a.float() if a.is_floating_point() else a for a in args)


def batchnorm_in_float32(model: nn.Module) -> int:
    """Feed every BatchNorm layer of `model` float32 inputs (a forward pre-hook); returns how
    many layers it hooked.

    Under bf16 autocast a convolution's output is bfloat16 while BatchNorm's weights and
    running statistics stay float32. Eager BatchNorm takes that mix, but its torch.func batching
    rule (the vectorised engine's vmap over clients) does not ("expected scalar type BFloat16
    but found Float" forward, "Expected grad_output to have type BFloat16" backward). BatchNorm
    computes its statistics in float32 either way, so casting its input changes no value beyond
    the rounding of its own output; the next layer casts back under autocast."""
    hooked = 0
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.register_forward_pre_hook(_float_inputs)
            hooked += 1
    return hooked


def has_conv(model: nn.Module) -> bool:
    return any(isinstance(m, nn.Conv2d) for m in model.modules())


def to_channels_last(model: nn.Module) -> None:
    """Keep a convolutional model's weights in NHWC (the plan's `channels_last`)."""
    model.to(memory_format=torch.channels_last)


class GraphedForward:
    """The model's forward, replayed as a CUDA graph for batches of the captured shape.

    Capture happens at the first batch (make_graphed_callables runs a few warm-up iterations,
    whose BatchNorm statistics updates are undone); later batches of another shape run eagerly.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.eager: Callable[[Tensor], Tensor] = model.forward
        #: The model with its forward graphed (make_graphed_callables returns the module it is
        #: given, typed as a module or a callable).
        self.graphed: Callable[..., Any] | None = None
        self.shape: torch.Size | None = None

    def __call__(self, x: Tensor) -> Tensor:
        if self.graphed is None and self.model.training:
            self._capture(x)
        if self.graphed is not None and x.shape == self.shape and self.model.training:
            return self.graphed(x)
        return self.eager(x)

    def _capture(self, x: Tensor) -> None:
        buffers = [b.detach().clone() for b in self.model.buffers()]
        graphed = torch.cuda.make_graphed_callables(self.model, (x.detach().clone(),))
        with torch.no_grad():
            for b, saved in zip(self.model.buffers(), buffers, strict=True):
                b.copy_(saved)
        self.graphed = graphed
        self.shape = x.shape
