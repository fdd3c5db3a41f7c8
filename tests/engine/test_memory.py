"""runtime.client_chunk: the per-client memory estimate and the automatic chunk."""

from __future__ import annotations

import torch
from torch import nn

from fedbench.engine.memory import (
    ACTIVATION_FACTOR,
    MODEL_COPIES,
    activation_bytes_per_sample,
    auto_client_chunk,
    client_bytes,
    free_memory_bytes,
)


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))


def test_activation_bytes_count_every_leaf_output() -> None:
    # Outputs of one sample: 5 (Linear) + 5 (ReLU) + 3 (Linear) float32 values.
    assert activation_bytes_per_sample(_mlp(), torch.zeros(6)) == (5 + 5 + 3) * 4


def test_client_bytes_is_model_copies_plus_batch_activations() -> None:
    weights = (6 * 5 + 5 + 5 * 3 + 3) * 4
    expected = MODEL_COPIES * weights + ACTIVATION_FACTOR * 13 * 4 * 32
    assert client_bytes(_mlp(), torch.zeros(6), batch_size=32) == expected


def test_probe_leaves_the_model_training_and_hook_free() -> None:
    model = _mlp().train()
    activation_bytes_per_sample(model, torch.zeros(6))
    assert model.training
    assert all(not m._forward_hooks for m in model.modules())


def test_auto_chunk_fits_half_the_free_memory() -> None:
    assert auto_client_chunk(per_client=100, free=1000, clients=10) == 5
    assert auto_client_chunk(per_client=100, free=10_000, clients=10) == 10  # at most S
    assert auto_client_chunk(per_client=100, free=50, clients=10) == 1  # at least one


def test_free_memory_is_positive_on_the_cpu() -> None:
    assert free_memory_bytes(torch.device("cpu")) > 0
