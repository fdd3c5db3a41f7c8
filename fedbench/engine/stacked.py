"""The vectorised engine's row trainer: clients stacked along a leading dimension, each from its
own start weights, trained together for K local steps (fedbench.engine.vectorized).

The round is the round protocol's (`run_rounds`, fedbench.engine.protocol: begin -> train ->
end -> finish, written there only); what differs from the sequential executor is the `train`
step: `train_rows` trains a chunk of begun clients as stacked rows and returns each one's
trained weights, buffers and local state. A row is a client with the run (engine) it belongs
to (`Row`); `row_batches` splits a round's clients into the chunks trained together (one
batch width per chunk where padding would enter batch statistics). One run's clients all
start from its global model; the
seeds of a table cell trained together (fedbench.engine.seeds) put several runs' clients into
one chunk, each starting from its own run's global model. Each local step is the algorithm's
`local_step_with_oracle` with a gradient oracle over the rows (`stacked_step`): every call of the
oracle is one vmap'd forward/backward over the rows at their current weights on the step's
batch (a rule may call it twice: FedSAM, FAFED), and its reductions are per row. The runs'
rows take one call where their rounds agree, else one per run on views of its rows; the local
rule (elementwise, scalars per run) and everything after the K steps (client_end, the upload
into the round's results: the protocol's `end_client`) run per run, so each run computes what
it computes on its own.
A rule that takes the full local-data gradient (MimeLite, at its first step) gets it from the
oracle's `full`: `full_gradients`, the rows' batches of one width stacked.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor
from torch.func import grad, vmap
from torch.utils._pytree import tree_map

from fedbench.algorithms.base import Algorithm, RoundInfo, Scalar, State, StepOracle
from fedbench.config import RunConfig
from fedbench.data.sampler import batch_indices, client_seed
from fedbench.engine.aggregation import local_step_sizes
from fedbench.engine.client_state import index_state, stack_states
from fedbench.engine.graphed import StaticStep, StepGraphs
from fedbench.engine.protocol import ClientStart, FederationRound, Member, Trained, run_rounds
from fedbench.engine.setup import RunSetup
from fedbench.step import Objective, autocast_context, clip_by_norm_


class StackedRun(Protocol):
    """What the row trainer reads of each run whose clients it trains (the vectorised engine of
    fedbench.engine.vectorized is one; seeds trained together are several): its data, start
    weights and the model functions of the stacked step."""

    setup: RunSetup
    cfg: RunConfig
    x: list[Tensor]
    global_buffers: list[Tensor]
    autocast: torch.dtype | None
    #: The trainable parameters' and the stacked buffers' names, in the order of x and buffers.
    names: list[str]
    buffer_names: list[str]
    #: vmap(grad(loss)) over the stacked clients, with and without a sample mask.
    grad_fn: Callable[..., dict[str, Tensor]]
    grad_fn_unweighted: Callable[..., dict[str, Tensor]]
    #: The run's local objective (its loss from logits).
    objective: Objective
    #: For a rule that `uses_representation` (MOON): f(tensors, x) -> (z, logits) with the
    #: model's tensors replaced, and the anchors' representation f(weights, x) (no gradient);
    #: else None.
    representation: Representation | None
    #: True: `whole_step` is the compiled stacked step (gradients, clipping and the local rule
    #: as one graph; `runtime.compile` with a capturable rule).
    tensor_scalars: bool
    #: The stacked step replayed as a CUDA graph on static buffers (`runtime.cuda_graphs`,
    #: fedbench.engine.graphed); None: eager (or compiled) steps.
    step_graphs: StepGraphs | None

    def whole_step(
        self,
        y: list[Tensor],
        buffers: dict[str, Tensor],
        local: State,
        xb: Tensor,
        yb: Tensor,
        mask: Tensor | None,
        k: int,
        info: RoundInfo,
    ) -> None: ...

    def client_chunk(self, clients: int) -> int: ...

    def batch_width(self, client: int) -> int: ...


@dataclass(frozen=True)
class Representation:
    """What the stacked representation objective calls (fedbench.models.representation)."""

    #: f(tensors, x) -> (z, logits): the model with its named tensors replaced.
    represent_and_classify: Callable[[Mapping[str, Tensor], Tensor], tuple[Tensor, Tensor]]
    #: f(weights, x) -> z under other trainable weights (eval mode, no gradient): the anchors.
    represent_with: Callable[[list[Tensor], Tensor], Tensor]


@dataclass(frozen=True)
class Row:
    """One begun client of one run, trained as a row: the run's engine, the client as
    `begin_client` left it, and whether its round measures local step ratios (diagnostics)."""

    engine: StackedRun
    start: ClientStart
    diagnostics: bool = False

    @property
    def client(self) -> int:
        return self.start.client

    @property
    def info(self) -> RoundInfo:
        return self.start.info


@dataclass
class StepGroup:
    """Rows [start, stop) of the stacked tensors that take one call of the local rule: one run's
    clients, or the clients of several runs whose rounds agree (same algorithm class and round
    info: an elementwise rule then computes each row exactly as its run alone would)."""

    algorithm: Algorithm
    info: RoundInfo
    start: int
    stop: int
    local: Any


def segments(jobs: list[Row]) -> Iterator[tuple[StackedRun, int, int]]:
    """(engine, start, stop) of each run of consecutive rows of one engine."""
    start = 0
    for engine, group in itertools.groupby(jobs, key=lambda job: job.engine):
        size = len(list(group))
        yield engine, start, start + size
        start += size


def width_groups(members: list[Member], engines: list[StackedRun]) -> list[list[Member]]:
    """The members (run index, client) in groups trained apart: with BatchNorm or a
    representation term, one group per batch width (padded samples would enter the batch
    statistics, or the term's batch mean); otherwise one group (padded).

    Each run sees its own groups in the order it meets their widths, as it does alone (so that
    its uploads are added in the same order); runs whose next width agrees train together."""
    lead = engines[members[0][0]]
    if not lead.buffer_names and lead.representation is None:
        return [members]
    queues = []
    for i, own_members in itertools.groupby(members, key=lambda member: member[0]):
        own: dict[int, list[Member]] = {}
        for member in own_members:
            own.setdefault(engines[i].batch_width(member[1]), []).append(member)
        queues.append(list(own.items()))
    groups = []
    while any(queues):
        width = next(q[0][0] for q in queues if q)
        group: list[Member] = []
        for q in queues:
            if q and q[0][0] == width:
                group += q.pop(0)[1]
        groups.append(group)
    return groups


def row_batches(engines: list[StackedRun]) -> Callable[[list[Member]], list[list[Member]]]:
    """The round protocol's `batches` for stacked rows: the members in width groups, each in
    chunks of the lead run's `client_chunk` (taken for all the members at once)."""

    def batches(members: list[Member]) -> list[list[Member]]:
        if not members:
            return []
        chunk = engines[members[0][0]].client_chunk(len(members))
        return [
            group[start : start + chunk]
            for group in width_groups(members, engines)
            for start in range(0, len(group), chunk)
        ]

    return batches


def stacked_rounds(
    engines: list[StackedRun], rounds: list[FederationRound]
) -> list[dict[str, Any] | None]:
    """One round of each engine (the protocol's `run_rounds`), all their clients trained as
    stacked rows (`train_rows`); returns each round's diagnostics."""

    def train(starts: list[tuple[int, ClientStart]]) -> list[Trained]:
        rows = [Row(engines[i], start, rounds[i].results.diagnostics) for i, start in starts]
        return train_rows(rows)

    return run_rounds(rounds, train, row_batches(engines))


def _orders(
    jobs: list[Row], k_steps: int
) -> tuple[Callable[[int], Tensor], Tensor | None, list[torch.Generator]]:
    """The clients' batches as a function of the local step k (0-based) giving (S, B) batch
    indices, drawn one local epoch at a time; an optional (S, B) sample mask (clients of
    unequal widths, padded); and the clients' generators (each from its run's seed)."""
    orders, generators = [], []
    for job in jobs:
        s, cfg = job.engine.setup, job.engine.cfg
        generator = torch.Generator().manual_seed(
            client_seed(cfg.seed, job.info.round_index, job.client)
        )
        orders.append(
            batch_indices(
                s.clients[job.client],
                k_steps,
                cfg.fl.batch_size,
                generator,
                advance=s.data.augment is not None,  # it augments the batches next
            )
        )
        generators.append(generator)
    widths = [o.shape[1] for o in orders]
    widest = max(widths)
    if all(w == widest for w in widths):
        return (lambda k: torch.stack([o[k] for o in orders])), None, generators
    device = jobs[0].engine.setup.device
    mask = torch.zeros(len(orders), widest, device=device)
    for i, w in enumerate(widths):
        mask[i, :w] = 1.0

    def padded(k: int) -> Tensor:
        rows = torch.zeros(len(orders), widest, dtype=torch.int64, device=device)
        for i, o in enumerate(orders):
            rows[i, : widths[i]] = o[k]
        return rows

    return padded, mask, generators


def _batch(jobs: list[Row], idx: Tensor, generators: list[torch.Generator]) -> Tensor:
    """The (S, B, ...) inputs of step idx: each client's samples from its run's data (runs that
    share one data set gather once), augmented with its own generator."""
    parts = []
    for engine, start, stop in _data_segments(jobs):
        data = engine.setup.data
        xb = data.x_train[idx[start:stop]]
        if data.augment is not None:
            xb = torch.stack(
                [data.augment(xb[i], generators[start + i]) for i in range(stop - start)]
            )
        parts.append(xb)
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _labels(jobs: list[Row], idx: Tensor) -> Tensor:
    parts = [e.setup.data.y_train[idx[a:b]] for e, a, b in _data_segments(jobs)]
    return parts[0] if len(parts) == 1 else torch.cat(parts)


def _data_segments(jobs: list[Row]) -> list[tuple[StackedRun, int, int]]:
    """Like `segments`, but runs that hold the same data object share one segment."""
    merged: list[tuple[StackedRun, int, int]] = []
    for engine, start, stop in segments(jobs):
        if merged and merged[-1][0].setup.data is engine.setup.data:
            merged[-1] = (merged[-1][0], merged[-1][1], stop)
        else:
            merged.append((engine, start, stop))
    return merged


def _start(jobs: list[Row]) -> tuple[list[StepGroup], list[Tensor], dict[str, Tensor]]:
    """The local-rule groups with their clients' stacked local states (as client_begin left
    them), and the stacked start weights and buffers: every client starts from its own run's
    global model."""
    groups, weights, buffers = [], [], []
    for engine, start, stop in segments(jobs):
        info = jobs[start].info
        local = stack_states([job.start.local for job in jobs[start:stop]])
        groups.append(StepGroup(engine.setup.algorithm, info, start, stop, local))
        n = stop - start
        weights.append([t.unsqueeze(0).expand(n, *t.shape) for t in engine.x])
        buffers.append([g.unsqueeze(0).expand(n, *g.shape) for g in engine.global_buffers])
    lead = jobs[0].engine
    y = [torch.cat(parts) for parts in zip(*weights, strict=True)]
    stacked = {
        name: torch.cat(parts)
        for name, parts in zip(lead.buffer_names, zip(*buffers, strict=True), strict=False)
    }
    for i, job in enumerate(jobs):  # client i's model: x and its personal part (a row's views)
        algorithm = job.engine.setup.algorithm
        if algorithm.personalises:
            with torch.no_grad():
                rows = [stacked[name][i] for name in lead.buffer_names]
                algorithm.load_client([t[i] for t in y], rows, job.start.stored)
    return _merged(groups), y, stacked


def _merged(groups: list[StepGroup]) -> list[StepGroup]:
    """The runs' groups as one when their rounds agree (the usual case: the seeds of a cell at
    the same round), so that the local rule runs once over all rows instead of once per run."""
    first = groups[0]
    if len(groups) == 1 or any(
        type(g.algorithm) is not type(first.algorithm) or g.info != first.info for g in groups
    ):
        return groups
    local = stack_states([g.local for g in groups], torch.cat)
    return [StepGroup(first.algorithm, first.info, 0, groups[-1].stop, local)]


def train_rows(jobs: list[Row]) -> list[Trained]:
    """Train the rows together for K steps: each one's trained weights, buffers, local state
    and (diagnostic rounds) local step ratio, in order (the round protocol's `train`)."""
    lead = jobs[0].engine
    s = lead.setup
    n = len(jobs)
    k_steps = jobs[0].info.local_steps
    groups, y, buffers = _start(jobs)
    orders, mask, generators = _orders(jobs, k_steps)
    s.model.train()
    diagnostics = any(job.diagnostics for job in jobs)
    step_sizes = torch.zeros(n, dtype=torch.float64, device=s.device)
    graphs = lead.step_graphs if len(groups) == 1 else None  # one rule call: one graph
    static: StaticStep | None = None
    start = (y, buffers, groups[0].local)
    for k in range(1, k_steps + 1):
        idx = orders(k - 1)
        xb, yb = _batch(jobs, idx, generators), _labels(jobs, idx)
        if s.prepare is not None:
            xb = s.prepare(xb.flatten(0, 1)).unflatten(0, idx.shape)
        before = [t.clone() for t in y] if diagnostics else None
        info = groups[0].info.at_step(k)
        if graphs is not None:  # the step replayed on static buffers (fedbench.engine.graphed)
            if static is None:
                static = graphs.begin(groups[0].algorithm, *start, xb, yb, mask, info)
                y = static.y  # the chunk now trains on the static buffers
            step = functools.partial(stacked_step, lead, groups[0].algorithm)
            graphs.step(static, step, groups[0].algorithm, start, xb, yb, k, info)
        elif lead.tensor_scalars and len(groups) == 1:  # one rule call: the compiled whole step
            lead.whole_step(y, buffers, groups[0].local, xb, yb, mask, k, info)
        else:
            for group in groups:  # each run's own local rule and scalars, on its rows
                if group.stop - group.start == n:
                    full = functools.partial(full_gradients, jobs, y, buffers)
                    stacked_step(lead, group.algorithm, y, buffers, group.local, xb, yb, mask, k,
                                 group.info.at_step(k), full)  # fmt: skip
                    continue
                rows = slice(group.start, group.stop)
                y_rows = [t[rows] for t in y]  # views: the step updates the rows in place
                buffer_rows = {name: b[rows] for name, b in buffers.items()}
                stacked_step(
                    lead,
                    group.algorithm,
                    y_rows,
                    buffer_rows,
                    group.local,
                    xb[rows],
                    yb[rows],
                    None if mask is None else mask[rows],
                    k,
                    group.info.at_step(k),
                    functools.partial(full_gradients, jobs[rows], y_rows, buffer_rows),
                )
        if before is not None:
            step_sizes = step_sizes + local_step_sizes(before, y, n)
    if static is not None:
        y, buffers, groups[0].local = static.ends()
    return _trained(jobs, groups, y, buffers, step_sizes if diagnostics else None)


def stacked_step(
    engine: StackedRun,
    algorithm: Algorithm,
    y: list[Tensor],
    buffers: dict[str, Tensor],
    local: State,
    xb: Tensor,
    yb: Tensor,
    mask: Tensor | None,
    k: Scalar,
    info: RoundInfo,
    full: Callable[[], list[Tensor]] | None = None,
) -> None:
    """Local step k of the stacked rows y (in place): the rule's `local_step_with_oracle` with
    the rows' gradient oracle, which computes `stacked_gradients` at the current y on this
    step's batch at each call (one call for a one-gradient rule, two for FedSAM's ascent point
    and FAFED's previous point), offers the rows' full local-data gradients (`full`: the eager
    step's `full_gradients`, for MimeLite) and reduces per row (`GradientOracle.norm`). The
    eager step and the compiled whole step (`StackedRun.whole_step`) both run this."""

    def gradient() -> list[Tensor]:
        if algorithm.uses_representation:
            return representation_gradients(engine, algorithm, y, buffers, xb, yb, local, info)
        return stacked_gradients(engine, y, buffers, xb, yb, mask)

    oracle = StepOracle(gradient, rows=y[0].shape[0], full=full)
    algorithm.local_step_with_oracle(y, oracle, local, k, info)


def stacked_gradients(
    engine: StackedRun,
    y: list[Tensor],
    buffers: dict[str, Tensor],
    xb: Tensor,
    yb: Tensor,
    mask: Tensor | None,
) -> list[Tensor]:
    """The stacked clients' gradients at y (vmap over the client dim, under the run's
    autocast), clipped per client, in the order of `engine.names`."""
    params = dict(zip(engine.names, y, strict=True))
    with autocast_context(engine.setup.device.type, engine.autocast):
        if mask is None:
            grads = engine.grad_fn_unweighted(params, buffers, xb, yb)
        else:
            grads = engine.grad_fn(params, buffers, xb, yb, mask)
    g = [grads[name] for name in engine.names]
    clip_by_norm_(g, engine.cfg.algorithm.grad_clip, rows=True)
    return g


def full_gradients(jobs: list[Row], y: list[Tensor], buffers: dict[str, Tensor]) -> list[Tensor]:
    """Each row's gradient of its mean objective over all of its client's samples at y (Mime's
    grad f_i(x)), as the sequential engine's `full_gradient` takes it: batches of batch_size
    in the client's sample order, the sum of the batch losses' gradients over the samples,
    clipped per row. Rows whose j-th batch has the same width are stacked (no padding, so
    BatchNorm's batch statistics are each batch's own); the passes run on copies of the
    buffers, so that they change nothing but the gradient returned; no augmentation."""
    lead = jobs[0].engine
    samples = [job.engine.setup.clients[job.client] for job in jobs]
    sizes = [int(part.numel()) for part in samples]
    batch = lead.cfg.fl.batch_size or max(sizes)
    total = [torch.zeros_like(t) for t in y]
    for start in range(0, max(sizes), batch):
        widths: dict[int, list[int]] = {}
        for i, size in enumerate(sizes):
            if size > start:
                widths.setdefault(min(batch, size - start), []).append(i)
        for width, members in widths.items():
            parts = [
                (jobs[i].engine.setup.data, samples[i][start : start + width]) for i in members
            ]
            xb = torch.stack([data.x_train[idx] for data, idx in parts])
            yb = torch.stack([data.y_train[idx] for data, idx in parts])
            prepare = lead.setup.prepare
            if prepare is not None:
                xb = prepare(xb.flatten(0, 1)).unflatten(0, (len(members), width))
            # Consecutive rows (the usual case: every full batch) as a slice, else an index
            # tensor (a copy to the device: only for the last batches of unequal clients).
            first, last = members[0], members[-1]
            at: slice | Tensor = (
                slice(first, last + 1)
                if last - first + 1 == len(members)
                else torch.tensor(members, device=y[0].device)
            )
            params = dict(zip(lead.names, [t[at] for t in y], strict=True))
            # The passes update copies of the buffers: the stacked ones stay as they were.
            copies = {name: b[at].clone() for name, b in buffers.items()}
            with autocast_context(lead.setup.device.type, lead.autocast):
                grads = lead.grad_fn_unweighted(params, copies, xb, yb)
            with torch.no_grad():
                for t, name in zip(total, lead.names, strict=True):
                    # the batch's summed gradient (its mean times its width), row by row
                    summed = grads[name].detach() * width
                    if isinstance(at, slice):
                        t[at].add_(summed)
                    else:
                        t.index_add_(0, at, summed)
    divisor = torch.tensor(sizes, dtype=total[0].dtype, device=total[0].device)
    total = [t / divisor.view(-1, *([1] * (t.ndim - 1))) for t in total]
    clip_by_norm_(total, lead.cfg.algorithm.grad_clip, rows=True)
    return total


def representation_gradients(
    engine: StackedRun,
    algorithm: Algorithm,
    y: list[Tensor],
    buffers: dict[str, Tensor],
    xb: Tensor,
    yb: Tensor,
    local: State,
    info: RoundInfo,
) -> list[Tensor]:
    """The stacked clients' gradients at y of the objective plus the rule's representation term
    (MOON), as the sequential engine's local loss: CE(classify(z), labels) +
    `representation_loss(z, anchor, local, info)` with z the batch's representation and the
    anchors under each row's own weights (its local state's rows: vmap over the state too).
    Batches are never padded here (`width_groups`); clipped per client."""
    rep = engine.representation
    assert rep is not None, "a representation rule on an engine without its representation"
    objective = engine.objective

    def loss(
        params: dict[str, Tensor], buffers: dict[str, Tensor], x: Tensor, labels: Tensor, row: Any
    ) -> Tensor:
        z, logits = rep.represent_and_classify({**params, **buffers}, x)

        def anchor(weights: list[Tensor]) -> Tensor:
            return rep.represent_with(weights, x)

        return objective.loss(logits, labels) + algorithm.representation_loss(z, anchor, row, info)

    # The local state rides along the rows: its tensors are mapped, anything else is shared.
    state_dims = tree_map(lambda leaf: 0 if isinstance(leaf, Tensor) else None, local)
    grad_fn = vmap(grad(loss), in_dims=(0, 0, 0, 0, state_dims), randomness="different")
    params = dict(zip(engine.names, y, strict=True))
    with autocast_context(engine.setup.device.type, engine.autocast):
        grads = grad_fn(params, buffers, xb, yb, local)
    g = [grads[name] for name in engine.names]
    clip_by_norm_(g, engine.cfg.algorithm.grad_clip, rows=True)
    return g


def _trained(
    jobs: list[Row],
    groups: list[StepGroup],
    y: list[Tensor],
    buffers: dict[str, Tensor],
    step_sizes: Tensor | None,
) -> list[Trained]:
    """Each row's trained weights, buffers and local state (views of the stacked tensors, read
    by `client_end` before anything trains them again) and its local step ratio."""
    lead = jobs[0].engine
    trained = []
    for group in groups:
        for i in range(group.start, group.stop):
            job = jobs[i]
            ratio = None
            if step_sizes is not None and job.diagnostics:
                ratio = float(step_sizes[i] / job.info.local_steps / job.info.lr)
            trained.append(
                Trained(
                    [t[i] for t in y],
                    [buffers[name][i] for name in lead.buffer_names],
                    ratio,
                    index_state(group.local, i - group.start),
                )
            )
    return trained
