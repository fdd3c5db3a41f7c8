"""LEAF's reference models (Caldas et al. 2018; the LEAF repository's models/<dataset>/*.py),
rebuilt in PyTorch with the same layers:

- leaf_femnist_cnn: conv5x5-32 (same) + ReLU + max-pool 2, conv5x5-64 (same) + ReLU + max-pool 2,
  dense 2048 + ReLU, dense to the classes (62 on FEMNIST); inputs 1x28x28.
- leaf_celeba_cnn: 4 x [conv3x3-32 (same), norm, max-pool 2 (TF "same": ceil), ReLU], dense to
  the classes; inputs 3x84x84. The norm is LEAF's BatchNorm (`model.norm: bn`) or GroupNorm.
- char_lstm: embedding 8 of the 80 LEAF symbols, two LSTM layers of 256, dense to the 80 symbols
  from the last step (next-character prediction); inputs (80,) character codes.
- char_lstm_100: the same with two LSTM layers of 100, the size of the FedAdamom code's
  Shakespeare model (`shakes_LSTM` in its models/Nets.py; the paper states none).
"""

from __future__ import annotations

import torch
from torch import nn

from fedbench.config import ModelConfig
from fedbench.errors import FedbenchError
from fedbench.models.base import MODELS, image_input
from fedbench.models.resnet import norm_factory


@MODELS.register("leaf_femnist_cnn")
def leaf_femnist_cnn(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """LEAF's FEMNIST CNN: two conv5x5 (32, 64) + pools, dense 2048, dense classes."""
    c, h, w = image_input("leaf_femnist_cnn", input_shape)
    return nn.Sequential(
        nn.Conv2d(c, 32, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * (h // 4) * (w // 4), 2048),
        nn.ReLU(),
        nn.Linear(2048, num_classes),
    )


@MODELS.register("leaf_celeba_cnn")
def leaf_celeba_cnn(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """LEAF's CelebA CNN: four [conv3x3-32, norm, pool, ReLU] blocks, dense classes."""
    c, h, w = image_input("leaf_celeba_cnn", input_shape)
    norm = norm_factory(cfg.norm, cfg.norm_groups)
    layers: list[nn.Module] = []
    for i in range(4):
        layers += [
            nn.Conv2d(c if i == 0 else 32, 32, 3, padding=1),
            norm(32),
            nn.MaxPool2d(2, ceil_mode=True),
            nn.ReLU(),
        ]
        h, w = -(-h // 2), -(-w // 2)
    return nn.Sequential(*layers, nn.Flatten(), nn.Linear(32 * h * w, num_classes))


class CharLSTM(nn.Module):
    """Embedding 8 -> 2-layer LSTM of `hidden` (LEAF: 256) -> dense on the last step."""

    def __init__(self, symbols: int, num_classes: int, hidden: int = 256) -> None:
        super().__init__()
        self.embed = nn.Embedding(symbols, 8)
        self.lstm = nn.LSTM(8, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(x.long()))
        return self.head(out[:, -1])


@MODELS.register("char_lstm")
def char_lstm(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """LEAF's Shakespeare char-LSTM: embedding 8, two LSTM layers of 256, next symbol."""
    if len(input_shape) != 1:
        raise FedbenchError(
            f"model char_lstm needs character sequences (L,), got shape {input_shape}"
        )
    return CharLSTM(num_classes, num_classes)


@MODELS.register("char_lstm_100")
def char_lstm_100(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """The FedAdamom code's Shakespeare LSTM: embedding 8, two LSTM layers of 100, next symbol."""
    if len(input_shape) != 1:
        raise FedbenchError(
            f"model char_lstm_100 needs character sequences (L,), got shape {input_shape}"
        )
    return CharLSTM(num_classes, num_classes, hidden=100)
