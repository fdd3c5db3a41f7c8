"""Block partitions of the trainable parameters (FedAdamW's block-wise second moments).

A partition splits every parameter tensor into contiguous groups of rows (dim 0); each group is
one block, and FedAdamW communicates and restores one mean of v per block. `tensor` makes each
tensor one block, `module` one block per module (all its tensors together), `global` makes the
whole model one block; `hessian` (the FedAdamW paper's
partition) and `dp_paper` (the DP-FedAdamW paper's) group rows by role (per head, per neuron, per
layer; fedbench.algorithms.hessian) and are built from the same pieces; `auto` picks one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast, get_args

import torch
from torch import Tensor

from fedbench.algorithms.hessian import RoleKind, module_ids, role_row_groups, roles_known
from fedbench.errors import FedbenchError

if TYPE_CHECKING:
    from fedbench.algorithms.base import ParamSpec


@dataclass(frozen=True)
class BlockPartition:
    """For each tensor: None (the whole tensor is one block) or a list of row-group sizes.
    With `shared` (blocks: module), every tensor is whole and tensors with the same id form one
    block (ids 0..B-1 in order of first appearance)."""

    shapes: list[torch.Size]
    row_groups: list[list[int] | None]
    whole_model: bool = False
    shared: list[int] | None = None

    @property
    def n_blocks(self) -> int:
        if self.whole_model:
            return 1
        if self.shared is not None:
            return max(self.shared, default=-1) + 1
        return sum(1 if groups is None else len(groups) for groups in self.row_groups)

    def block_counts(self) -> list[int]:
        """Number of blocks of each tensor (a block shared by several tensors, the whole-model
        one included, is counted once, on its first tensor)."""
        if self.whole_model:
            return [1] + [0] * (len(self.shapes) - 1)
        if self.shared is not None:
            first = {b: i for i, b in reversed(list(enumerate(self.shared)))}
            return [int(first[b] == i) for i, b in enumerate(self.shared)]
        return [1 if groups is None else len(groups) for groups in self.row_groups]

    def _indices(self, device: torch.device) -> _Indices:
        """The partition's index tensors on `device`, made once per device: a block mean or an
        expansion then costs a few ops per tensor (not one per block: thousands for ViT's
        per-row blocks) and no copy from the host (which waits for the device on a GPU)."""
        cache: dict[torch.device, _Indices] = self.__dict__.setdefault("_index_cache", {})
        if device not in cache:
            cache[device] = _Indices.build(self, device)
        return cache[device]

    def means(self, tensors: list[Tensor]) -> Tensor:
        """The block means of `tensors` as one vector of length n_blocks."""
        if self.whole_model:
            total = torch.stack([t.sum() for t in tensors]).sum()
            return (total / sum(t.numel() for t in tensors)).reshape(1)
        index = self._indices(tensors[0].device)
        if self.shared is not None:
            assert index.shared is not None and index.shared_sizes is not None
            sums = torch.stack([t.sum() for t in tensors])
            totals = torch.zeros(self.n_blocks, dtype=sums.dtype, device=sums.device)
            counts = torch.zeros_like(totals)
            totals.index_add_(0, index.shared, sums)
            counts.index_add_(0, index.shared, index.shared_sizes.to(sums.dtype))
            return totals / counts
        parts = []
        for t, groups, rows in zip(tensors, self.row_groups, index.rows, strict=True):
            if groups is None or rows is None:
                parts.append(t.mean().reshape(1))
            else:
                # Every row has the same size, so a block mean is the mean of its row means.
                # Rows: sum(groups) of them (dim 0, or the token dim of a (1, N, D) table).
                row_means = t.reshape(sum(groups), -1).mean(dim=1)
                block_of_row, rows_per_block = rows
                sums = torch.zeros(len(groups), dtype=t.dtype, device=t.device)
                sums.index_add_(0, block_of_row, row_means)
                parts.append(sums / rows_per_block.to(t.dtype))
        return torch.cat(parts)

    def expand(self, block_means: Tensor) -> list[Tensor]:
        """Tensors of the partition's shapes whose every coordinate holds its block's mean."""
        if self.whole_model:
            return [block_means[0].expand(shape).clone() for shape in self.shapes]
        if self.shared is not None:
            return [
                block_means[b].expand(s).clone()
                for b, s in zip(self.shared, self.shapes, strict=True)
            ]
        out = []
        offset = 0
        for shape, groups in zip(self.shapes, self.row_groups, strict=True):
            if groups is None:
                out.append(block_means[offset].expand(shape).clone())
                offset += 1
            else:
                local = block_means[offset : offset + len(groups)]
                rows_of = self._indices(block_means.device).rows[len(out)]
                assert rows_of is not None
                rows = local.index_select(0, rows_of[0])  # each row's block mean
                width = shape.numel() // len(rows)
                out.append(rows.unsqueeze(1).expand(len(rows), width).reshape(shape).contiguous())
                offset += len(groups)
        return out


@dataclass(frozen=True)
class _Indices:
    """A partition's index tensors on one device (BlockPartition._indices)."""

    #: Per tensor with row groups: (the block of each row, the rows of each block); else None.
    rows: list[tuple[Tensor, Tensor] | None]
    #: blocks: module: the block of each tensor, and each tensor's number of entries.
    shared: Tensor | None = None
    shared_sizes: Tensor | None = None

    @classmethod
    def build(cls, partition: BlockPartition, device: torch.device) -> _Indices:
        rows: list[tuple[Tensor, Tensor] | None] = []
        for groups in partition.row_groups:
            if groups is None:
                rows.append(None)
                continue
            sizes = torch.tensor(groups)
            block_of_row = torch.repeat_interleave(torch.arange(len(groups)), sizes)
            rows.append((block_of_row.to(device), sizes.to(device)))
        if partition.shared is None:
            return cls(rows)
        numel = [float(torch.Size(s).numel()) for s in partition.shapes]
        return cls(
            rows,
            torch.tensor(partition.shared, device=device),
            torch.tensor(numel, dtype=torch.float64, device=device),
        )


#: The `blocks:` values of fedadamw (docs/algorithms.md, "Block partitions").
BlockKind = Literal["auto", "tensor", "module", "hessian", "dp_paper", "global"]
BLOCK_KINDS: tuple[str, ...] = get_args(BlockKind)


def resolve_blocks(kind: str, spec: ParamSpec | None = None) -> str:
    """`auto` is `hessian` for a model whose parameter roles are known (it declares attention
    heads: ViT, Swin, RoBERTa, their LoRA adapters) and `tensor` otherwise (CNNs, logreg)."""
    if kind != "auto":
        return kind
    return "hessian" if spec is not None and roles_known(spec) else "tensor"


def build_partition(
    kind: str, shapes: list[torch.Size], spec: ParamSpec | None = None
) -> BlockPartition:
    """The `blocks:` setting of fedadamw: auto | tensor | module | global | hessian | dp_paper
    (module and the last two need the ParamSpec: names, and head counts for the last two)."""
    shapes = [torch.Size(s) for s in shapes]
    kind = resolve_blocks(kind, spec)
    if kind in get_args(RoleKind) and spec is not None:
        return BlockPartition(shapes, role_row_groups(spec, cast(RoleKind, kind)))
    if kind == "module" and spec is not None:
        return BlockPartition(shapes, [None] * len(shapes), shared=module_ids(spec.names))
    if kind == "tensor":
        return BlockPartition(shapes, [None] * len(shapes))
    if kind == "global":
        return BlockPartition(shapes, [None] * len(shapes), whole_model=True)
    raise FedbenchError(
        f"blocks: {kind} is not available for this model; use blocks: tensor or blocks: global"
    )


def block_layout(spec: ParamSpec, kind: str = "auto") -> list[tuple[str, tuple[int, ...], int]]:
    """(name, shape, number of blocks) per trainable tensor under `blocks: kind`."""
    counts = build_partition(kind, spec.shapes, spec).block_counts()
    return [(n, tuple(s), c) for n, s, c in zip(spec.names, spec.shapes, counts, strict=True)]
