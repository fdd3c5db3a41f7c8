"""Per-client algorithm states (nested dicts / lists / tuples of tensors): moving them between
devices, and stacking them along a leading client dimension for the vectorised engine."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


def to_device(state: Any, device: torch.device) -> Any:
    """A client state with every tensor on `device` (non-tensor leaves kept as they are)."""
    if isinstance(state, Tensor):
        return state.to(device)
    if isinstance(state, dict):
        return {k: to_device(v, device) for k, v in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(to_device(v, device) for v in state)
    return state


def stack_states(states: list[Any]) -> Any:
    """Stack per-client states along a new leading client dim.
    Non-tensor leaves (floats, flags) must agree across clients and are kept as they are."""
    first = states[0]
    if isinstance(first, Tensor):
        return torch.stack(states)
    if isinstance(first, dict):
        return {k: stack_states([s[k] for s in states]) for k in first}
    if isinstance(first, list | tuple):
        return type(first)(stack_states(list(items)) for items in zip(*states, strict=True))
    return first


def index_state(state: Any, i: int) -> Any:
    """Client i's view of a stacked state."""
    if isinstance(state, Tensor):
        return state[i]
    if isinstance(state, dict):
        return {k: index_state(v, i) for k, v in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(index_state(v, i) for v in state)
    return state
