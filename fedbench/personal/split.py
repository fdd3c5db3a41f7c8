"""Split-model personalisation: the rule pieces FedBN, FedPer, FedRep, LG-FedAvg and FedBABU share
(docs/personalised.md, "Split-model methods").

A split method partitions the model's trainable tensors in two: a *shared* part that every sampled
client uploads and the server averages, and a *local* part that never leaves the client and is
kept for it between rounds. A client starts its round from the global model with its own local
part put back (`start_weights`); during its K steps it trains the tensors its schedule says
(`masked_sgd_step_`: all of them, the body only, the head only); it uploads the change of the
shared part only (`shared_delta`, zeros on the local part, so the server's copy of the local part
never moves) and keeps its local part (`local_part`). What is local is each method's:

    FedPer, FedRep     the head (personal classifier), shared body
    LG-FedAvg          the body (local representation), shared head
    FedBN              the BatchNorm layers (affine parameters; their running statistics are
                       buffers, kept beside them)
    FedBABU            nothing local during training; the head is frozen at its initialisation
                       (never trained, so its upload is zero) and fine-tuned at evaluation

A mask is one bool per trainable tensor in the algorithm's order (`ParamSpec.names`). The local
part is stored as the list of its tensors in that order (the compact form: a client keeps only
its own tensors, not a model-sized copy). Every function is elementwise per tensor (a Python-level
choice of tensors, then torch._foreach_* ops), so the same rule runs on one client's tensors and
on the vectorised engine's stacked rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch

from fedbench.algorithms.base import Scalar, Tensors, TensorSeq, add_coupled_decay_, add_scaled_

#: One bool per trainable tensor, in the algorithm's order.
Mask = tuple[bool, ...]


def invert(mask: Mask) -> Mask:
    """The other part of the split."""
    return tuple(not m for m in mask)


def pick(tensors: TensorSeq, mask: Mask) -> Tensors:
    """The tensors whose mask entry is True, in order (the same tensor objects: views to update
    in place)."""
    if len(tensors) != len(mask):
        raise ValueError(f"{len(tensors)} tensors but a mask of {len(mask)}")
    return [t for t, m in zip(tensors, mask, strict=True) if m]


def start_weights(x: TensorSeq, kept: TensorSeq | None, local: Mask) -> Tensors:
    """y^0 of a client: x on the shared part, the client's kept tensors on its local part (x
    there too on a first visit, `kept` None: a client that never trained starts from the global
    model's copy of the local part, which the server never changes)."""
    if kept is None:
        return list(x)
    if len(kept) != sum(local):
        raise ValueError(f"{len(kept)} kept tensors for a local part of {sum(local)}")
    own = iter(kept)
    return [next(own) if m else t for t, m in zip(x, local, strict=True)]


def local_part(y: TensorSeq, local: Mask) -> Tensors:
    """What a client keeps after its round: copies of its local tensors (y is the resident model
    or a stacked row, overwritten by the next client)."""
    return [t.detach().clone() for t in pick(y, local)]


def shared_delta(y: TensorSeq, x: TensorSeq, local: Mask) -> Tensors:
    """The upload Delta_i: y - x on the shared part, exactly 0 on the local part, so that the
    server's mean (and its step x <- x + eta_g Delta_bar) leaves x's local part as it was."""
    return [torch.zeros_like(xj) if m else yj - xj for yj, xj, m in zip(y, x, local, strict=True)]


def masked_sgd_step_(
    y: TensorSeq, g: TensorSeq, trained: Mask, *, lr: Scalar, weight_decay: float
) -> None:
    """y_j <- y_j - lr (g_j + lambda y_j) for the tensors with trained[j]; the others are left
    exactly as they are (no weight decay on a frozen tensor: the papers' gradient step is on the
    trained block only). g may be overwritten."""
    ys, gs = pick(y, trained), pick(g, trained)
    if not ys:
        return
    add_coupled_decay_(gs, ys, weight_decay)
    add_scaled_(ys, gs, -lr)


Phase = Literal["head", "body"]
Order = Literal["head_first", "body_first"]


def head_steps(local_steps: int, head_epochs: int, body_epochs: int) -> int:
    """FedRep's K_h: the share of a client's K local steps spent on the head, in the ratio of the
    paper's head and body epochs, rounded down: K_h = floor(K h / (h + b)); the body gets the
    other K - K_h. With K a multiple of a client's steps per epoch (K = (h + b) * n_i / B) this
    is exactly h epochs of head steps."""
    total = head_epochs + body_epochs
    if total <= 0:
        raise ValueError("head_epochs + body_epochs must be positive")
    return local_steps * head_epochs // total


def fedrep_phase(
    k: int, local_steps: int, head_epochs: int, body_epochs: int, order: Order
) -> Phase:
    """What FedRep's local step k (1-based) of K trains: with `head_first` (Collins et al. 2021,
    Algorithm 1) steps 1..K_h the head, the rest the body; with `body_first` the body's K - K_h
    steps come first."""
    k_head = head_steps(local_steps, head_epochs, body_epochs)
    if order == "head_first":
        return "head" if k <= k_head else "body"
    return "body" if k <= local_steps - k_head else "head"


def mask_of(names: Sequence[str], chosen: frozenset[str] | set[str]) -> Mask:
    """The mask of the tensors named in `chosen` (each must be a trainable tensor's name)."""
    unknown = set(chosen) - set(names)
    if unknown:
        raise ValueError(f"not trainable tensors of the model: {sorted(unknown)}")
    return tuple(name in chosen for name in names)
