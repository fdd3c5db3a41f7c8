"""ResNet-18, CIFAR variant (He et al. 2016): 3x3 stride-1 stem, no max-pool, as in the FedAdamW
paper's Table 1. `model.norm: gn` swaps BatchNorm for GroupNorm (`model.norm_groups`, default
32, capped at the channel count; the FedAdamom code builds 2), which DP training and the
vectorised engine need."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from fedbench.config import ModelConfig
from fedbench.models.base import MODELS, image_input
from fedbench.models.representation import RepresentationClassifier

#: A normalisation layer for a number of channels.
NormFactory = Callable[[int], nn.Module]


def norm_factory(kind: str, groups: int) -> NormFactory:
    """BatchNorm2d, or GroupNorm with min(groups, channels) groups."""
    if kind == "bn":
        return nn.BatchNorm2d
    return lambda channels: nn.GroupNorm(min(groups, channels), channels)


class BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int, norm: NormFactory) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = norm(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = norm(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), norm(c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class ResNet18(RepresentationClassifier):
    def __init__(self, in_channels: int, num_classes: int, norm: NormFactory) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False)
        self.bn1 = norm(64)
        layers, c_in = [], 64
        for c_out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers.append(
                nn.Sequential(
                    BasicBlock(c_in, c_out, stride, norm), BasicBlock(c_out, c_out, 1, norm)
                )
            )
            c_in = c_out
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.fc = nn.Linear(512, num_classes)

    def represent(self, x: torch.Tensor) -> torch.Tensor:
        """The pooled 512-d representation (the classifier's input)."""
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        return torch.flatten(nn.functional.adaptive_avg_pool2d(out, 1), 1)

    def classify(self, z: torch.Tensor) -> torch.Tensor:
        return self.fc(z)


@MODELS.register("resnet18")
def resnet18(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """ResNet-18, CIFAR variant (3x3 stem, no max-pool); model.norm bn or gn (GroupNorm, for DP)."""
    channels, _, _ = image_input("resnet18", input_shape)
    return ResNet18(channels, num_classes, norm_factory(cfg.norm, cfg.norm_groups))
