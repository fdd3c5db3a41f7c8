"""The model registry: a model is one decorated builder function (timm-style)."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from fedbench.config import ModelConfig
from fedbench.registry import Registry

#: builder(cfg, input_shape (C, H, W) or (F,), num_classes) -> nn.Module
ModelBuilder = Callable[[ModelConfig, tuple[int, ...], int], nn.Module]

MODELS: Registry[ModelBuilder] = Registry("model")


def build_model(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    model = MODELS.get(cfg.name)(cfg, input_shape, num_classes)
    if cfg.init == "zeros":
        for p in model.parameters():
            nn.init.zeros_(p)
    return model


def count_trainable(model: nn.Module) -> int:
    """d: the number of trainable scalars."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
