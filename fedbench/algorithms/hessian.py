"""FedAdamW's Hessian partition (Algorithm 3 / Appendix D of the FedAdamW paper), by parameter role:

- embeddings (token / patch / position) and the output head: one block per row (token / class);
- query and key weights: one block per attention head (rows h*d_head..(h+1)*d_head); a fused qkv
  weight (timm `attn.qkv`, fedbench's vit_tiny) is split into its q, k, v thirds first;
- value, attention output projection, MLP / feed-forward weights: one block per output row;
- everything else (norms, biases, convolutions, class tokens, relative-position tables, LoRA
  matrices): one block per tensor.

Roles are read from the parameter names of timm ViT/Swin, Hugging Face RoBERTa and fedbench's
vit_tiny; a 2-D `.weight` not named otherwise is a linear map or an embedding, so it gets one
block per row. Head counts come from the model (ParamSpec.heads).
"""

from __future__ import annotations

import torch

from fedbench.algorithms.base import ParamSpec
from fedbench.algorithms.blocks import BlockPartition
from fedbench.errors import FedbenchError

QUERY_KEY = {"query", "key", "q_proj", "k_proj", "q", "k"}
POSITION_TABLES = ("pos_embed", "position_embeddings")


def _heads(spec: ParamSpec, name: str) -> int:
    if name not in spec.heads:
        raise FedbenchError(
            f"blocks: hessian needs the number of attention heads of {name}, and its module has "
            "no num_heads / num_attention_heads; use blocks: tensor"
        )
    return spec.heads[name]


def _per_head(rows: int, heads: int, name: str) -> list[int]:
    if rows % heads:
        raise FedbenchError(
            f"blocks: hessian: {name} has {rows} rows, not divisible by {heads} heads"
        )
    return [rows // heads] * heads


def row_groups(spec: ParamSpec, name: str, shape: torch.Size) -> list[int] | None:
    """The row groups of one parameter (None: the whole tensor is one block)."""
    if "lora_" in name:
        return None
    leaf = name.rsplit(".", 1)[-1]
    module = name.rsplit(".", 2)[-2] if name.count(".") >= 1 else ""
    if leaf in POSITION_TABLES and len(shape) == 3 and shape[0] == 1:
        return [1] * shape[1]  # timm's (1, tokens, dim) position table: one block per token
    if len(shape) != 2 or leaf != "weight":
        return None
    if module == "qkv":
        dim = shape[0] // 3
        heads = _heads(spec, name)
        return _per_head(dim, heads, name) * 2 + [1] * dim
    if module in QUERY_KEY:
        return _per_head(shape[0], _heads(spec, name), name)
    return [1] * shape[0]


def hessian_partition(spec: ParamSpec) -> BlockPartition:
    shapes = [torch.Size(s) for s in spec.shapes]
    groups = [row_groups(spec, n, s) for n, s in zip(spec.names, shapes, strict=True)]
    return BlockPartition(shapes, groups)


def block_layout(spec: ParamSpec, kind: str = "hessian") -> list[tuple[str, tuple[int, ...], int]]:
    """(name, shape, number of blocks) per trainable tensor under `blocks: kind`."""
    from fedbench.algorithms.blocks import build_partition

    counts = build_partition(kind, spec.shapes, spec).block_counts()
    return [(n, tuple(s), c) for n, s, c in zip(spec.names, spec.shapes, counts, strict=True)]
