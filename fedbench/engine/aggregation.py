"""Aggregation of a round: the clients' uploads, the model's float buffers and the round's
diagnostics, then the server step. Both engines end every round through `finish_round`.

The uploads are reduced as a streaming (weighted) mean, so nothing per client is kept: a round
of S clients costs one model-sized sum per upload key, whatever S is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from fedbench.algorithms.base import Algorithm, ClientUpload, RoundInfo, State
from fedbench.errors import DivergedError


def _squared_norm(tensors: list[Tensor]) -> Tensor:
    return torch.stack([n.double() for n in torch._foreach_norm(tensors)]).square().sum()


def all_finite(tensors: list[Tensor]) -> bool:
    """True when no entry is NaN or infinite (one host sync for the whole list)."""
    return bool(torch.isfinite(torch.stack([t.float().sum() for t in tensors])).all())


class Aggregator:
    """Streaming (weighted) mean of the clients' uploads and float buffers: nothing per client.

    With `spread_of`, it also sums the clients' squared norms of that upload, so that
    mean_i ||u_i - u_bar||^2 = mean_i ||u_i||^2 - ||u_bar||^2 needs no per-client copy.
    """

    def __init__(self, spread_of: str | None = None) -> None:
        self.sums: dict[str, list[Tensor]] = {}
        self.total = 0.0
        self.spread_of = spread_of
        self.squared_norms: Tensor | float = 0.0

    def add(self, upload: dict[str, list[Tensor]], weight: float) -> None:
        for key, tensors in upload.items():
            if key not in self.sums:
                self.sums[key] = [t.detach().mul(weight) for t in tensors]
            else:
                torch._foreach_add_(self.sums[key], list(tensors), alpha=weight)
        if self.spread_of is not None:
            self.squared_norms = self.squared_norms + weight * _squared_norm(upload[self.spread_of])
        self.total += weight

    def means(self) -> dict[str, list[Tensor]]:
        return {k: torch._foreach_div(v, self.total) for k, v in self.sums.items()}

    def spread(self, mean: list[Tensor]) -> float:
        """(Weighted) mean squared distance of the `spread_of` uploads to their mean."""
        value = float(self.squared_norms) / self.total - float(_squared_norm(mean))
        return max(value, 0.0)  # rounding can make an exact zero slightly negative


def round_diagnostics(
    agg: Aggregator, mean: dict[str, list[Tensor]], v_means: list[Tensor]
) -> dict[str, Any]:
    """FedAdamW Figure 2: client_drift = mean_i ||Delta_i - Delta_bar||^2 and v_spread = the
    variance across clients of each block mean of v, averaged over the blocks (None without v)."""
    return {
        "client_drift": agg.spread(mean["delta"]),
        "v_spread": (
            float(torch.stack(v_means).var(dim=0, unbiased=False).mean()) if v_means else None
        ),
    }


class RoundResults:
    """What the sampled clients of one round hand back, reduced as they arrive.

    `add` takes one client's upload, its aggregation weight, its model buffers (BatchNorm
    statistics, when the model has any) and, for the diagnostics, its block means of v.
    """

    def __init__(self, diagnostics: bool, keep_uploads: bool = False) -> None:
        self.diagnostics = diagnostics
        #: Every client's upload, kept only for algorithms that read them all
        #: (`Algorithm.uses_client_uploads`); otherwise only the streaming mean exists.
        self.keep_uploads = keep_uploads
        self.client_uploads: list[ClientUpload] = []
        self.uploads = Aggregator(spread_of="delta" if diagnostics else None)
        self.buffers = Aggregator()
        self.v_means: list[Tensor] = []
        #: Integer buffers (BatchNorm's step counter) are not averaged: the first client's.
        self.int_buffers: list[Tensor] | None = None

    def add(
        self,
        upload: dict[str, list[Tensor]],
        weight: float,
        buffers: Sequence[Tensor] = (),
        v_block_means: Tensor | None = None,
        client: int = -1,
    ) -> None:
        self.uploads.add(upload, weight)
        if self.keep_uploads:
            self.client_uploads.append(ClientUpload.kept(client, weight, upload))
        floats = [b for b in buffers if b.is_floating_point()]
        if floats:
            self.buffers.add({"b": floats}, weight)
        if self.int_buffers is None:
            self.int_buffers = [b.detach().clone() for b in buffers if not b.is_floating_point()]
        if self.diagnostics and v_block_means is not None:
            self.v_means.append(v_block_means.double())


def finish_round(
    results: RoundResults,
    algorithm: Algorithm,
    x: list[Tensor],
    server: State,
    global_buffers: list[Tensor],
    info: RoundInfo,
) -> dict[str, Any] | None:
    """Aggregate -> check finiteness -> diagnostics -> server step -> global buffers.

    Updates x, the server state and the global buffers in place; returns the round's
    diagnostics (None without them). Raises DivergedError on a non-finite mean update, the
    round's one host-side finiteness check.
    """
    mean = results.uploads.means()
    if not all_finite(mean["delta"]):
        raise DivergedError(f"non-finite model update in round {info.round + 1}")
    diagnostics = (
        round_diagnostics(results.uploads, mean, results.v_means) if results.diagnostics else None
    )
    with torch.no_grad():
        algorithm.server_update_with_uploads(x, mean, results.client_uploads, server, info)
        float_means = iter(results.buffers.means().get("b", []))
        int_values = iter(results.int_buffers or [])
        for g in global_buffers:
            g.copy_(next(float_means) if g.is_floating_point() else next(int_values))
    return diagnostics
