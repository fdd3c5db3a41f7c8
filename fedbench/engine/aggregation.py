"""Aggregation of a round: the clients' uploads, the model's float buffers and the round's
diagnostics, then the server step. Both engines end every round through `finish_round`.

The uploads are reduced as a streaming (weighted) mean, so nothing per client is kept: a round
of S clients costs one model-sized sum per upload key, whatever S is.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from fedbench.algorithms.base import (
    Algorithm,
    ClientUpload,
    RoundInfo,
    State,
    Upload,
    squared_norm,
)
from fedbench.errors import DivergedError
from fedbench.privacy.client_level import ClientLevelRound


class FiniteWatch:
    """The first round whose mean update was not finite, recorded on the device.

    A host-side check after every round would make the host wait for the device once per
    round; instead each round adds its verdict to a 0-d device tensor (no sync), and `check`
    reads it (one sync) where the engine reads the device anyway: before an evaluation, before
    a checkpoint is written, and at the end of the run. The error names the first non-finite
    round, as a check after every round would; the rounds trained after it are lost work only.
    """

    def __init__(self) -> None:
        #: 0 while every observed round was finite, else the first non-finite round (1-based).
        self.first_bad: Tensor | None = None

    def observe(self, tensors: list[Tensor], round_number: int) -> None:
        """Record whether `tensors` (round `round_number`'s mean update) are all finite."""
        finite = torch.isfinite(torch.stack([t.float().sum() for t in tensors])).all()
        here = (~finite).to(torch.int64) * round_number
        if self.first_bad is None:
            self.first_bad = here
        else:
            self.first_bad = torch.where(self.first_bad > 0, self.first_bad, here)

    def check(self) -> None:
        """Raise DivergedError if any observed round was not finite (one host sync)."""
        if self.first_bad is None:
            return
        first = int(self.first_bad)
        if first:
            raise DivergedError(f"non-finite model update in round {first}", round=first)


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

    def add(self, upload: Upload, weight: float) -> None:
        for key, tensors in upload.items():
            if key not in self.sums:
                self.sums[key] = [t.detach().mul(weight) for t in tensors]
            else:
                torch._foreach_add_(self.sums[key], list(tensors), alpha=weight)
        if self.spread_of is not None:
            self.squared_norms = self.squared_norms + weight * squared_norm(upload[self.spread_of])
        self.total += weight

    def means(self) -> dict[str, list[Tensor]]:
        return {k: list(torch._foreach_div(v, self.total)) for k, v in self.sums.items()}

    def spread(self, mean: list[Tensor]) -> float:
        """(Weighted) mean squared distance of the `spread_of` uploads to their mean."""
        value = float(self.squared_norms) / self.total - float(squared_norm(mean))
        return max(value, 0.0)  # rounding can make an exact zero slightly negative


def round_diagnostics(
    agg: Aggregator,
    mean: dict[str, list[Tensor]],
    v_means: list[Tensor],
    step_ratios: Sequence[float] = (),
) -> dict[str, Any]:
    """FedAdamW Figure 2: client_drift = mean_i ||Delta_i - Delta_bar||^2 and v_spread = the
    variance across clients of each block mean of v, averaged over the blocks (None without v);
    relative_drift = client_drift / ||Delta_bar||^2, the drift with the step scale divided out
    (so that methods at different learning rates compare by heterogeneity, not by lr; None when
    Delta_bar = 0); and local_step_ratio = the clients' mean of `local_step_ratio` (None when
    not measured)."""
    drift = agg.spread(mean["delta"])
    mean_sq = float(squared_norm(mean["delta"]))
    return {
        "client_drift": drift,
        "relative_drift": drift / mean_sq if mean_sq > 0 else None,
        "v_spread": (
            float(torch.stack(v_means).var(dim=0, unbiased=False).mean()) if v_means else None
        ),
        "local_step_ratio": sum(step_ratios) / len(step_ratios) if step_ratios else None,
    }


def local_step_sizes(before: list[Tensor], after: list[Tensor], clients: int | None) -> Tensor:
    """RMS over the d coordinates of one local step y_k - y_{k-1} (float64): one value, or one
    per client when the tensors are stacked along a leading client dim of size `clients`."""
    if clients is None:
        squares = sum(
            float(n.double() ** 2) for n in torch._foreach_norm(torch._foreach_sub(after, before))
        )
        d = sum(t.numel() for t in after)
        return torch.tensor(squares / d, dtype=torch.float64).sqrt()
    diffs = torch._foreach_sub(after, before)
    rows = [t.reshape(clients, -1).double().square().sum(dim=1) for t in diffs]
    per_client: Tensor = functools.reduce(operator.add, rows)  # sum(rows), typed as a tensor
    return (per_client / sum(t[0].numel() for t in after)).sqrt()


class RoundResults:
    """What the sampled clients of one round hand back, reduced as they arrive.

    `add` takes one client's upload, its aggregation weight, its model buffers (BatchNorm
    statistics, when the model has any) and, for the diagnostics, its block means of v and its
    local step ratio (mean over its K steps of RMS(y_k - y_{k-1}) / eta_r).
    """

    def __init__(
        self,
        diagnostics: bool,
        keep_uploads: bool = False,
        client_dp: ClientLevelRound | None = None,
    ) -> None:
        self.diagnostics = diagnostics
        #: Client-level DP (privacy.level client): clips each upload as it arrives and
        #: privatises the round's sum in `finish_round`.
        self.client_dp = client_dp
        #: Every client's upload, kept only for algorithms that read them all
        #: (`Algorithm.uses_client_uploads`); otherwise only the streaming mean exists.
        self.keep_uploads = keep_uploads
        self.client_uploads: list[ClientUpload] = []
        self.uploads = Aggregator(spread_of="delta" if diagnostics else None)
        self.buffers = Aggregator()
        self.v_means: list[Tensor] = []
        self.step_ratios: list[float] = []
        #: Integer buffers (BatchNorm's step counter) are not averaged: the first client's.
        self.int_buffers: list[Tensor] | None = None

    def add(
        self,
        upload: Upload,
        weight: float,
        buffers: Sequence[Tensor] = (),
        v_block_means: Tensor | None = None,
        client: int = -1,
        step_ratio: float | None = None,
    ) -> None:
        if self.client_dp is not None:
            upload = self.client_dp.add(upload)
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
        if self.diagnostics and step_ratio is not None:
            self.step_ratios.append(step_ratio)


def finish_round(
    results: RoundResults,
    algorithm: Algorithm,
    x: list[Tensor],
    server: State,
    global_buffers: list[Tensor],
    info: RoundInfo,
    watch: FiniteWatch,
) -> dict[str, Any] | None:
    """Aggregate -> record finiteness -> diagnostics -> server step -> global buffers.

    Updates x, the server state and the global buffers in place; returns the round's
    diagnostics (None without them). Whether the mean update is finite goes to `watch`, on the
    device: outside diagnostic rounds nothing here reads a device value back.
    """
    if results.client_dp is not None:
        mean = results.client_dp.privatise(results.uploads.sums)
    else:
        mean = results.uploads.means()
    watch.observe(mean["delta"], info.round_index + 1)
    diagnostics = (
        round_diagnostics(results.uploads, mean, results.v_means, results.step_ratios)
        if results.diagnostics
        else None
    )
    with torch.no_grad():
        algorithm.server_update_with_uploads(x, mean, results.client_uploads, server, info)
        float_means = iter(results.buffers.means().get("b", []))
        int_values = iter(results.int_buffers or [])
        local = algorithm.local_buffers()  # never averaged: the server's copies stay
        for j, g in enumerate(global_buffers):
            if j not in local:
                g.copy_(next(float_means) if g.is_floating_point() else next(int_values))
    return diagnostics
