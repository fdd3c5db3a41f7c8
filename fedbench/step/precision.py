"""The precision of a step's forward pass: torch.autocast to the run's dtype (bf16), or nothing
(fedbench.engine.accelerate sets the dtype from `runtime.precision`)."""

from __future__ import annotations

import contextlib

import torch


def autocast_context(
    device_type: str, dtype: torch.dtype | None, *, cache: bool | None = None
) -> contextlib.AbstractContextManager[object]:
    """torch.autocast to `dtype`, or nothing when it is None. `cache=False` turns off the
    weight-cast cache, which CUDA graph capture needs off (and which lives for one step anyway);
    None keeps the current setting (on, outside another autocast)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type, dtype=dtype, cache_enabled=cache)
