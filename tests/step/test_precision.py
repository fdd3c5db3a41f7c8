"""The forward's autocast, written once (fedbench.step.precision)."""

from __future__ import annotations

import torch
from torch import nn

from fedbench.step import autocast_context


def test_autocast_context_casts_to_the_dtype_or_leaves_float32() -> None:
    layer = nn.Linear(3, 2)
    x = torch.ones(1, 3)
    with autocast_context("cpu", torch.bfloat16):
        assert layer(x).dtype == torch.bfloat16
        assert torch.is_autocast_cache_enabled()
    with autocast_context("cpu", None):
        assert layer(x).dtype == torch.float32
    with autocast_context("cpu", torch.bfloat16, cache=False):
        # CUDA graph capture needs the weight-cast cache off.
        assert not torch.is_autocast_cache_enabled()
        assert layer(x).dtype == torch.bfloat16
    assert torch.is_autocast_cache_enabled()
