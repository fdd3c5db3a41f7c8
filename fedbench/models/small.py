"""Small models for embedded data: logistic regression, a compact CNN (with or without
BatchNorm) and a one-hidden-layer MLP."""

from __future__ import annotations

import math

from torch import nn

from fedbench.config import ModelConfig
from fedbench.errors import FedbenchError
from fedbench.models.base import MODELS, image_input


@MODELS.register("logreg")
def logreg(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Flatten + Linear with bias (`model.init: zeros` zeroes both)."""
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), num_classes))


@MODELS.register("cnn")
def cnn(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """conv32-pool-conv64-pool-fc128-fc: works for 8x8, 28x28 and 32x32 inputs (any H, W >= 4)."""
    c, h, w = image_input("cnn", input_shape, hint="; use logreg")
    if h < 4 or w < 4:
        raise FedbenchError(f"model cnn needs images of at least 4x4, got {h}x{w}")
    return nn.Sequential(
        nn.Conv2d(c, 32, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * (h // 4) * (w // 4), 128),
        nn.ReLU(),
        nn.Linear(128, num_classes),
    )


@MODELS.register("cnn_bn")
def cnn_bn(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """The cnn with BatchNorm after each convolution and after the hidden linear layer, before
    its ReLU (as the CNN of FedBN's digit experiments, Li et al. 2021): a small model with
    BatchNorm layers for the embedded data (fedbn; the normalisation is always BatchNorm)."""
    c, h, w = image_input("cnn_bn", input_shape, hint="; use logreg")
    if h < 4 or w < 4:
        raise FedbenchError(f"model cnn_bn needs images of at least 4x4, got {h}x{w}")
    return nn.Sequential(
        nn.Conv2d(c, 32, 3, padding=1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * (h // 4) * (w // 4), 128),
        nn.BatchNorm1d(128),
        nn.ReLU(),
        nn.Linear(128, num_classes),
    )


@MODELS.register("mlp")
def mlp(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """Flatten + one hidden layer of 32 ReLU units + Linear (FedAdamW paper, Figure 8's
    1-hidden-layer MLP; small enough for an exact Hessian on digits: 2,410 parameters)."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(math.prod(input_shape), 32),
        nn.ReLU(),
        nn.Linear(32, num_classes),
    )
