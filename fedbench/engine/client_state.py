"""Per-client algorithm states (nested dicts / lists / tuples of tensors): where the store lives,
moving them between devices, and stacking them along a leading client dimension for the vectorised engine."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

# Defined with the store (which sits below the engine): re-exported for the engine's modules.
from fedbench.personal.store import map_tensors, to_device

__all__ = ["client_state_device", "index_state", "map_tensors", "stack_states", "to_device"]


def client_state_device(store: str, compute: torch.device) -> torch.device:
    """Where the per-client state store lives between rounds (`runtime.client_state_device`):
    `cpu`, `device` (beside the model), or `auto`: the CPU when the model is on an accelerator,
    because N model-sized states rarely fit beside it."""
    if store == "cpu" or (store == "auto" and compute.type != "cpu"):
        return torch.device("cpu")
    return compute


def stack_states(states: list[Any], join: Callable[[list[Tensor]], Tensor] = torch.stack) -> Any:
    """Stack per-client states along a new leading client dim (`join=torch.cat`: concatenate
    stacked states along theirs). Non-tensor leaves (floats, flags) must agree across clients
    and are kept as they are (the first's)."""
    first = states[0]
    if isinstance(first, Tensor):
        return join(states)
    if isinstance(first, dict):
        return {k: stack_states([s[k] for s in states], join) for k in first}
    if isinstance(first, list | tuple):
        return type(first)(stack_states(list(items), join) for items in zip(*states, strict=True))
    return first


def index_state(state: Any, i: int) -> Any:
    """Client i's view of a stacked state."""
    return map_tensors(state, lambda t: t[i])
