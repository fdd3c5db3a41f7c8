"""Role-based block partitions of FedAdamW's second moment, read from the parameter names.

Two papers partition a transformer's v by the role of each weight; both are offered:

`hessian` (FedAdamW paper, method section and Appendix D, "Algorithm 3 Partition for
Transformers"), one block per dense sub-block of the Hessian:
- embeddings (token / patch / position) and the output head: one block per row (token / class);
- query and key weights: one block per attention head (rows h*d_head..(h+1)*d_head); a fused qkv
  weight (timm `attn.qkv`, fedbench's vit_tiny) is split into its q, k, v thirds first;
- value, attention output projection, MLP / feed-forward weights: one block per output row;
- the patch embedding (a convolution: a linear map of each patch): one block per output channel,
  as Appendix D's Algorithm 3 slices every "embed" parameter by its rows and Class 2 blocks a
  linear map per output neuron;

`dp_paper` (DP-FedAdamW paper, "Block-wise averaging strategy"), coarser:
- query, key and value weights: one block per attention head (a fused qkv: per head of each third);
- attention output projection, MLP layers, embeddings and the output layer: one block per layer;

`module` (FedAdamW paper, Appendix D.3, "Example: RoBERTa-Base Layer Partitioning"), coarsest:
one block per module, all of its trainable tensors together (weight, bias, LoRA A and B), so a
RoBERTa layer has q, k, v, attention output, the two feed-forward layers and the two layer norms
as its blocks (module_ids);

and in the first two, everything else (norms, biases, convolutions, class tokens, relative-position
tables) is one block per tensor, which for a CNN is the papers' "one block per convolutional
layer". Roles come from the parameter names of timm ViT/Swin, Hugging Face RoBERTa and fedbench's
vit_tiny; a 2-D `.weight` not named otherwise is a linear map or an embedding. A LoRA B matrix has
the output rows of the weight it adapts, so it is partitioned like that weight; a LoRA A matrix is
one block. Head counts come from the model (ParamSpec.heads).
"""

from __future__ import annotations

from typing import Literal

import torch

from fedbench.algorithms.base import ParamSpec
from fedbench.errors import FedbenchError

QUERY_KEY = {"query", "key", "q_proj", "k_proj", "q", "k"}
VALUE = {"value", "v_proj", "v"}
POSITION_TABLES = ("pos_embed", "position_embeddings")

Role = Literal["qkv", "query_key", "value", "position", "patch", "linear", "other"]
RoleKind = Literal["hessian", "dp_paper"]


def _heads(spec: ParamSpec, name: str, kind: str) -> int:
    if name not in spec.heads:
        raise FedbenchError(
            f"blocks: {kind} needs the number of attention heads of {name}, and its module has "
            "no num_heads / num_attention_heads; use blocks: tensor"
        )
    return spec.heads[name]


def _per_head(rows: int, heads: int, name: str, kind: str) -> list[int]:
    if rows % heads:
        raise FedbenchError(
            f"blocks: {kind}: {name} has {rows} rows, not divisible by {heads} heads"
        )
    return [rows // heads] * heads


def param_role(name: str, shape: torch.Size) -> Role:
    """The role of one trainable tensor, from its name and shape."""
    if ".lora_A." in name:
        return "other"
    if ".lora_B." in name:
        # peft names the B matrix `<module>.lora_B.<adapter>.weight`: it adapts <module>.weight.
        name = name.split(".lora_B.", 1)[0] + ".weight"
    leaf = name.rsplit(".", 1)[-1]
    module = name.rsplit(".", 2)[-2] if name.count(".") >= 1 else ""
    if leaf in POSITION_TABLES and len(shape) == 3 and shape[0] == 1:
        return "position"  # timm's (1, tokens, dim) position table
    if len(shape) == 4 and leaf == "weight" and "patch_embed" in name:
        return "patch"  # timm's patch_embed.proj, fedbench vit_tiny's patch_embed
    if len(shape) != 2 or leaf != "weight":
        return "other"
    if module == "qkv":
        return "qkv"
    if module in QUERY_KEY:
        return "query_key"
    if module in VALUE:
        return "value"
    return "linear"


def row_groups(
    spec: ParamSpec, name: str, shape: torch.Size, kind: RoleKind = "hessian"
) -> list[int] | None:
    """The row groups of one parameter under `blocks: kind` (None: the tensor is one block)."""
    role = param_role(name, shape)
    if role == "other":
        return None
    if role == "position":
        return [1] * shape[1] if kind == "hessian" else None
    if role == "patch":
        return [1] * shape[0] if kind == "hessian" else None
    rows = shape[0]
    if role == "qkv":
        third = _per_head(rows // 3, _heads(spec, name, kind), name, kind)
        if kind == "hessian":
            return third * 2 + [1] * (rows // 3)  # q, k per head; v per output row
        return third * 3
    if role == "query_key" or (role == "value" and kind == "dp_paper"):
        return _per_head(rows, _heads(spec, name, kind), name, kind)
    # value (hessian), projections, MLP layers, embeddings, output head.
    return [1] * rows if kind == "hessian" else None


def roles_known(spec: ParamSpec) -> bool:
    """Whether the model declares attention heads for some trainable tensor: then its parameter
    roles are known and `blocks: auto` is the Hessian partition."""
    return any(name in spec.heads for name in spec.names)


def role_row_groups(spec: ParamSpec, kind: RoleKind) -> list[list[int] | None]:
    """The row groups of every trainable tensor under a role partition (fedbench.algorithms.blocks
    builds the BlockPartition from them)."""
    shapes = [torch.Size(s) for s in spec.shapes]
    return [row_groups(spec, n, s, kind) for n, s in zip(spec.names, shapes, strict=True)]


def module_of(name: str) -> str:
    """The module a trainable tensor belongs to: its name without the leaf (`.weight`, `.bias`)
    and, for a LoRA matrix, without `.lora_A.<adapter>.weight` (A and B join the module they adapt)."""
    for marker in (".lora_A.", ".lora_B."):
        if marker in name:
            return name.split(marker, 1)[0]
    return name.rsplit(".", 1)[0] if "." in name else name


def module_ids(names: list[str]) -> list[int]:
    """`blocks: module`: for each tensor, the index of its module's block (in order of first
    appearance)."""
    ids: dict[str, int] = {}
    return [ids.setdefault(module_of(n), len(ids)) for n in names]
