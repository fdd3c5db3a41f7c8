"""The model registry: a model is one decorated builder function (timm-style)."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from fedbench.config import ModelConfig
from fedbench.errors import FedbenchError
from fedbench.registry import Registry

#: builder(cfg, input_shape (C, H, W) or (F,), num_classes) -> nn.Module
ModelBuilder = Callable[[ModelConfig, tuple[int, ...], int], nn.Module]

MODELS: Registry[ModelBuilder] = Registry("model")

#: The models that can start from pretrained weights (`model.pretrained`, `model.weights`); each
#: adds its name where it registers. Every other model refuses both fields.
PRETRAINED: set[str] = set()


def image_input(name: str, input_shape: tuple[int, ...], hint: str = "") -> tuple[int, int, int]:
    """(C, H, W) of an image model's input; any other shape is a FedbenchError naming the model
    (`hint`: what to use instead)."""
    if len(input_shape) != 3:
        raise FedbenchError(
            f"model {name} needs image inputs (C, H, W), got shape {input_shape}{hint}"
        )
    c, h, w = input_shape
    return c, h, w


def check_weights_fields(cfg: ModelConfig) -> None:
    """A weights field that the model cannot use is an error, never silently ignored: weights
    for a model without pretrained weights, or `model.weights` without `model.pretrained`."""
    MODELS.get(cfg.name)  # an unknown model: the registry's error (did you mean), not this one
    if (cfg.pretrained or cfg.weights is not None) and cfg.name not in PRETRAINED:
        given = ["model.pretrained=true"] if cfg.pretrained else []
        given += [f"model.weights={cfg.weights}"] if cfg.weights is not None else []
        raise FedbenchError(
            f"model {cfg.name} has no pretrained weights, so {' and '.join(given)} cannot be "
            "used; drop it "
            f"(models with pretrained weights: {', '.join(sorted(PRETRAINED)) or 'none'})"
        )
    if cfg.weights is not None and not cfg.pretrained:
        raise FedbenchError(
            f"model.weights={cfg.weights} is set but model.pretrained is false, so the weights "
            f"would not be loaded; set model.pretrained=true or drop model.weights"
        )


def build_model(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    check_weights_fields(cfg)
    model = MODELS.get(cfg.name)(cfg, input_shape, num_classes)
    if cfg.init == "zeros":
        for p in model.parameters():
            nn.init.zeros_(p)
    return model


def count_trainable(model: nn.Module) -> int:
    """d: the number of trainable scalars."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
