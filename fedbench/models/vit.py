"""ViT-Tiny trained from scratch, FedAdamW paper Appendix C: 4x4 patches (2x2 for images smaller
than 16 px), dim 192, depth 6, 3 heads, MLP ratio 4, pre-norm LayerNorm, GELU, dropout 0.1,
fixed sinusoidal position embeddings, a class token and a linear head."""

from __future__ import annotations

import math

import torch
from torch import nn

from fedbench.config import ModelConfig
from fedbench.errors import FedbenchError
from fedbench.models.base import MODELS, image_input
from fedbench.models.representation import RepresentationClassifier


def sinusoidal_positions(n: int, dim: int) -> torch.Tensor:
    pos = torch.arange(n, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(n, dim)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)
    return table


class Attention(nn.Module):
    def __init__(self, dim: int, num_heads: int, dropout: float) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.dropout = dropout
        self.proj_drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = (
            self.qkv(x).view(b, n, 3, self.num_heads, d // self.num_heads).permute(2, 0, 3, 1, 4)
        )
        drop = self.dropout if self.training else 0.0
        out = nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=drop)
        return self.proj_drop(self.proj(out.transpose(1, 2).reshape(b, n, d)))


class Block(nn.Module):
    def __init__(self, dim: int, num_heads: int, mlp_ratio: int, dropout: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, num_heads, dropout)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, mlp_ratio * dim),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(mlp_ratio * dim, dim),
            nn.Dropout(dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class ViT(RepresentationClassifier):
    #: A buffer (register_buffer): the fixed sinusoidal position embedding, not trained.
    pos_embed: torch.Tensor

    def __init__(
        self,
        input_shape: tuple[int, int, int],
        num_classes: int,
        *,
        patch: int,
        dim: int = 192,
        depth: int = 6,
        num_heads: int = 3,
        mlp_ratio: int = 4,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        c, h, w = input_shape
        self.patch_embed = nn.Conv2d(c, dim, patch, patch)
        tokens = (h // patch) * (w // patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.register_buffer(
            "pos_embed", sinusoidal_positions(tokens + 1, dim).unsqueeze(0), persistent=False
        )
        self.pos_drop = nn.Dropout(dropout)
        self.blocks = nn.Sequential(
            *[Block(dim, num_heads, mlp_ratio, dropout) for _ in range(depth)]
        )
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)
        nn.init.trunc_normal_(self.cls_token, std=0.02)

    def represent(self, x: torch.Tensor) -> torch.Tensor:
        """The normalised class token (the classifier's input)."""
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        x = self.blocks(self.pos_drop(x + self.pos_embed))
        return self.norm(x[:, 0])

    def classify(self, z: torch.Tensor) -> torch.Tensor:
        return self.head(z)


@MODELS.register("vit_tiny")
def vit_tiny(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """ViT-Tiny from scratch (dim 192, depth 6, 3 heads; 4x4 patches, 2x2 under 16 px)."""
    c, h, w = image_input("vit_tiny", input_shape)
    patch = 4 if min(h, w) >= 16 else 2
    if h % patch or w % patch:
        raise FedbenchError(
            f"vit_tiny needs image sides divisible by its patch size {patch}, got {h}x{w}"
        )
    return ViT((c, h, w), num_classes, patch=patch)


@MODELS.register("vit_nano")
def vit_nano(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """The FedAdamW paper's small Transformer of Figure 7 (dim 16, 4 heads), one block, MLP
    ratio 2, no dropout, 4x4 patches: small enough for an exact Hessian on digits (2,714
    parameters), `fedbench figure fedadamw-hessian`."""
    c, h, w = image_input("vit_nano", input_shape)
    if h % 4 or w % 4:
        raise FedbenchError(f"vit_nano needs image sides divisible by 4, got {h}x{w}")
    return ViT(
        (c, h, w),
        num_classes,
        patch=4,
        dim=16,
        depth=1,
        num_heads=4,
        mlp_ratio=2,
        dropout=0.0,
    )
