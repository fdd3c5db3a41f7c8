"""The round protocol: one federated round, written once (docs/extending.md, "What the engine
does in a round").

A round of a federation is: for its clients (sampled by the caller), `client_begin` with the
client's stored state and its own round info -> the local training, supplied by the caller ->
`client_end`, the new client state stored and the upload added to the round's results (the
streaming, weighted mean of `RoundResults`) -> `finish_round` (aggregate, server step).

What trains a client is the caller's: the sequential engine runs the client's K steps on its
resident model (fedbench.engine.client), the update-rule tests run them on a float64
least-squares problem (tests/algorithms/harness.py), the escape-rate figure on its particles
(fedbench.figures.escape_rate). `clients_together` hands the trainer several clients at once
(the escape figure trains all of a round's clients as one stacked tensor). `run_rounds` runs
the rounds of several federations whose clients train together (the vectorised engine's
chunks of stacked rows, fedbench.engine.stacked; the seeds of a cell trained together): the
order begin -> train -> end -> finish is written here only.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from fedbench.algorithms.base import Algorithm, RoundInfo, State
from fedbench.engine.aggregation import FiniteWatch, RoundResults, finish_round
from fedbench.engine.client_state import to_device


def uniform_weight(client: int) -> float:
    """w_i = 1 for every client (`weighting: uniform`)."""
    return 1.0


@dataclass
class Federation:
    """One federation's server side as the protocol reads it and updates it in place: the
    algorithm, the global model x (and float/int buffers), the server state, the clients'
    stored states, each client's aggregation weight and where stored states live."""

    algorithm: Algorithm
    x: list[Tensor]
    server: State
    client_states: MutableMapping[int, State]
    #: The model's state_dict buffers (BatchNorm statistics), averaged like the uploads.
    global_buffers: list[Tensor] = field(default_factory=list)
    #: Where the rounds' finiteness is recorded (read where the caller reads the device).
    watch: FiniteWatch = field(default_factory=FiniteWatch)
    #: w_i of client i in the mean of the uploads (`weighting: samples`: its sample count).
    weight: Callable[[int], float] = uniform_weight
    #: Where a stored client state is moved for its client's round (the compute device) and
    #: where a new one is kept between rounds; None: left where it is.
    device: torch.device | None = None
    state_device: torch.device | None = None


@dataclass(frozen=True)
class ClientStart:
    """A client as `client_begin` left it: its round info (its own K_i), its local state for
    the round and its stored state (None the first time)."""

    client: int
    info: RoundInfo
    local: State
    stored: State | None


@dataclass(frozen=True)
class Trained:
    """A client after its local training: its weights y (read by `client_end` before anything
    trains again), its model buffers and, on diagnostic rounds, its local step ratio."""

    params: list[Tensor]
    buffers: Sequence[Tensor] = ()
    step_ratio: float | None = None
    #: The client's local state after training, where the trainer kept it apart from the one
    #: `client_begin` returned (stacked rows, or a client trained in another process: a copy
    #: of `ClientStart.local`), which `client_end` then reads instead; None: that one, updated
    #: in place.
    local: State | None = None


#: The local training: the clients handed over (one, or `clients_together`), each one's
#: trained weights, in order.
Train = Callable[[list[ClientStart]], Sequence[Trained]]


def client_info(info: RoundInfo, steps: int) -> RoundInfo:
    """The info a client sees with its own K_i (system heterogeneity, `fl.local_steps_min`):
    the server step keeps the round's nominal K (`RoundInfo.run_steps`)."""
    return replace(info, local_steps=steps, nominal_steps=info.local_steps)


def begin_client(fed: Federation, client: int, info: RoundInfo) -> ClientStart:
    """The client's stored state (on the compute device) and `client_begin`'s local state."""
    stored = fed.client_states.get(client)
    if stored is None:  # a first visit (Algorithm.new_client_state; None for most rules)
        stored = fed.algorithm.new_client_state(client, fed.x)
    if stored is not None and fed.device is not None:
        stored = to_device(stored, fed.device)
    local = fed.algorithm.client_begin(fed.x, fed.server, stored, info)
    return ClientStart(client, info, local, stored)


def end_client(
    fed: Federation, results: RoundResults, start: ClientStart, trained: Trained
) -> None:
    """`client_end` of one trained client: its new state stored, its upload (with its weight,
    buffers and, on diagnostic rounds, its block means of v and step ratio) added to `results`."""
    algorithm = fed.algorithm
    local = start.local if trained.local is None else trained.local
    with torch.no_grad():
        upload, new_state = algorithm.client_end(
            trained.params, fed.x, local, start.stored, start.info
        )
        if algorithm.personalises:
            new_state = algorithm.store_buffers(new_state, trained.buffers)
    if new_state is not None:
        device = fed.state_device
        fed.client_states[start.client] = (
            new_state if device is None else to_device(new_state, device)
        )
    results.add(
        {key: list(tensors) for key, tensors in upload.items()},  # a foreach op's tuple, too
        fed.weight(start.client),
        buffers=shared_buffers(algorithm, trained.buffers),
        v_block_means=algorithm.v_block_means(local) if results.diagnostics else None,
        client=start.client,
        step_ratio=trained.step_ratio,
    )


def shared_buffers(algorithm: Algorithm, buffers: Sequence[Tensor]) -> Sequence[Tensor]:
    """The buffers the round averages: all but the algorithm's `local_buffers` (FedBN's
    BatchNorm statistics stay on the clients)."""
    local = algorithm.local_buffers()
    return [b for j, b in enumerate(buffers) if j not in local] if local else buffers


def finish(fed: Federation, results: RoundResults, info: RoundInfo) -> dict[str, Any] | None:
    """The round's end: aggregation, finiteness, diagnostics, server step (`finish_round`)."""
    return finish_round(
        results, fed.algorithm, fed.x, fed.server, fed.global_buffers, info, fed.watch
    )


@dataclass
class FederationRound:
    """One federation's round as `run_rounds` runs it: its clients (sampled by the caller), the
    round info, the results its uploads go into and, optionally, each client's own K_i."""

    fed: Federation
    clients: Sequence[int]
    info: RoundInfo
    results: RoundResults
    steps_of: Callable[[int], int] | None = None

    def client_info(self, client: int) -> RoundInfo:
        return self.info if self.steps_of is None else client_info(self.info, self.steps_of(client))


#: A client of one of the rounds run together: (the index of its round, the client).
Member = tuple[int, int]
#: The local training of rounds run together: the begun clients, each with its round's index,
#: to each one's trained weights, in order.
TrainMembers = Callable[[list[tuple[int, ClientStart]]], Sequence[Trained]]


def run_rounds(
    rounds: Sequence[FederationRound],
    train: TrainMembers,
    batches: Callable[[list[Member]], list[list[Member]]],
) -> list[dict[str, Any] | None]:
    """The rounds of several federations, their clients trained together: `batches` splits the
    members (every round's clients, round by round) into the calls of `train`; each batch is
    begun just before its call and ended just after, in order; then every round's `finish`.
    Returns each round's diagnostics (None without)."""
    members = [(i, client) for i, r in enumerate(rounds) for client in r.clients]
    for batch in batches(members):
        starts = [(i, begin_client(rounds[i].fed, c, rounds[i].client_info(c))) for i, c in batch]
        for (i, start), trained in zip(starts, train(starts), strict=True):
            end_client(rounds[i].fed, rounds[i].results, start, trained)
    return [finish(r.fed, r.results, r.info) for r in rounds]


def run_round(
    fed: Federation,
    clients: Sequence[int],
    info: RoundInfo,
    train: Train,
    results: RoundResults | None = None,
    *,
    steps_of: Callable[[int], int] | None = None,
    clients_together: int | None = 1,
) -> dict[str, Any] | None:
    """One round of `fed` over `clients`: begin -> `train` -> end for each, then `finish`
    (`run_rounds` with one federation).

    `steps_of(client)` gives each client its own K_i (`client_info`); without it every client
    sees `info`. `train` gets `clients_together` clients at a time (None: all of them), begun
    just before and ended just after, so that a trainer of one client may reuse one model for
    the next. `results` default: the plain streaming mean (with every upload kept for an
    algorithm that `uses_client_uploads`). Returns the round's diagnostics (None without)."""
    if results is None:
        results = RoundResults(False, keep_uploads=fed.algorithm.uses_client_uploads)
    together = clients_together or max(len(clients), 1)

    def batches(members: list[Member]) -> list[list[Member]]:
        return [members[i : i + together] for i in range(0, len(members), together)]

    def train_one(starts: list[tuple[int, ClientStart]]) -> Sequence[Trained]:
        return train([start for _, start in starts])

    (found,) = run_rounds(
        [FederationRound(fed, clients, info, results, steps_of)], train_one, batches
    )
    return found
