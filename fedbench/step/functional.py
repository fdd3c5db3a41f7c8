"""The model's tensors as a functional call takes them: trainable parameters, the buffers that
are part of its state (BatchNorm statistics: stacked per client, averaged at a round's end),
and constants (frozen parameters, buffers outside the state dict) passed as they are."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn


@dataclass(frozen=True)
class ModelSplit:
    #: Trainable parameters' names, in the model's (and the algorithm's) order.
    names: list[str]
    #: Buffers in the state dict: trained state that a step updates in place.
    buffer_names: list[str]
    #: Frozen parameters and buffers outside the state dict: the same for every client.
    constants: dict[str, Tensor]

    def buffers(self, model: nn.Module) -> list[Tensor]:
        """The model's own state buffers, in `buffer_names` order."""
        found = dict(model.named_buffers())
        return [found[name] for name in self.buffer_names]


def split_model(model: nn.Module) -> ModelSplit:
    """The split of `model`'s tensors (module docstring)."""
    in_state = set(model.state_dict())
    return ModelSplit(
        names=[n for n, p in model.named_parameters() if p.requires_grad],
        buffer_names=[n for n, _ in model.named_buffers() if n in in_state],
        constants={
            **{n: p.detach() for n, p in model.named_parameters() if not p.requires_grad},
            **{n: b for n, b in model.named_buffers() if n not in in_state},
        },
    )
