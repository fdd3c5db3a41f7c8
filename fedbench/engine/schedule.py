"""Who trains when, and with which learning rate (docs/algorithms.md, "The shared round")."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import overload

import numpy as np

from fedbench.algorithms.base import RoundInfo
from fedbench.algorithms.hyperparams import AlgorithmConfig, schedule_factor


def clients_per_round(participation: float, num_clients: int) -> int:
    """S = max(1, round(participation * N))."""
    return max(1, round(participation * num_clients))


def sampled_clients(seed: int, round_idx: int, num_clients: int, sampled: int) -> list[int]:
    """The clients of round r: uniform without replacement from a generator seeded by (seed, r)."""
    rng = np.random.default_rng([seed, round_idx])
    return sorted(int(c) for c in rng.choice(num_clients, size=sampled, replace=False))


#: Salts of the per-(seed, round, client) draws, so that they are independent of each other and
#: of the client's batch order.
_DROPOUT_SALT, _STEPS_SALT, _POISSON_SALT = 0x0D, 0x5E, 0x9A


def poisson_clients(seed: int, round_idx: int, num_clients: int, sampled: int) -> list[int]:
    """Poisson client sampling (client-level DP with `privacy.sampling: poisson`): every client
    joins round r independently with probability q = S / N, so the round has S clients on
    average, possibly none: the sampling the client-level accountant analyses."""
    rng = np.random.default_rng([seed, round_idx, _POISSON_SALT])
    return [int(c) for c in np.flatnonzero(rng.random(num_clients) < sampled / num_clients)]


def drops_out(seed: int, round_idx: int, client: int, dropout: float) -> bool:
    """Whether the sampled client drops out of round r (probability `dropout`)."""
    if dropout <= 0.0:
        return False
    return bool(np.random.default_rng([seed, round_idx, client, _DROPOUT_SALT]).random() < dropout)


def round_clients(
    seed: int,
    round_idx: int,
    num_clients: int,
    sampled: int,
    dropout: float = 0.0,
    poisson: bool = False,
) -> list[int]:
    """The clients that train in round r: the sampled ones (exactly S, or Poisson at rate S/N
    with `poisson`) less those that drop out."""
    draw = poisson_clients if poisson else sampled_clients
    chosen = draw(seed, round_idx, num_clients, sampled)
    return [c for c in chosen if not drops_out(seed, round_idx, c, dropout)]


def client_local_steps(
    seed: int, round_idx: int, client: int, local_steps: int, local_steps_min: int | None
) -> int:
    """K_i of the client in round r: local_steps, or uniform over local_steps_min..local_steps."""
    if local_steps_min is None or local_steps_min == local_steps:
        return local_steps
    rng = np.random.default_rng([seed, round_idx, client, _STEPS_SALT])
    return int(rng.integers(local_steps_min, local_steps + 1))


@dataclass(frozen=True)
class ClientSchedule(Sequence[list[int]]):
    """The whole schedule, known before training (DP accounting and resume rely on it), drawn
    round by round when asked: `schedule[r]` is `round_clients(seed, r, ...)` (the sampled
    clients less those that drop out), so memory does not grow with the number of rounds (a run
    of 10**9 rounds starts at once) and any round can be read without the ones before it (a
    resumed run). `schedule[:r]` is the first r rounds."""

    seed: int
    rounds: range
    num_clients: int
    sampled: int
    dropout: float = 0.0
    poisson: bool = False
    #: The clients that may train (`eval.unseen_clients` holds the others out), drawn from as
    #: clients 0..len-1 are drawn otherwise; None: every client.
    members: tuple[int, ...] | None = None

    def __len__(self) -> int:
        return len(self.rounds)

    @overload
    def __getitem__(self, index: int) -> list[int]: ...
    @overload
    def __getitem__(self, index: slice) -> ClientSchedule: ...
    def __getitem__(self, index: int | slice) -> list[int] | ClientSchedule:
        if isinstance(index, slice):
            return replace(self, rounds=self.rounds[index])
        return self._round(self.rounds[index])

    def __iter__(self) -> Iterator[list[int]]:
        for r in self.rounds:
            yield self._round(r)

    def _round(self, r: int) -> list[int]:
        if self.members is not None:
            members = self.members
            drawn = round_clients(self.seed, r, len(members), self.sampled, 0.0, self.poisson)
            return [
                members[i] for i in drawn if not drops_out(self.seed, r, members[i], self.dropout)
            ]
        return round_clients(
            self.seed, r, self.num_clients, self.sampled, self.dropout, self.poisson
        )


def client_schedule(
    seed: int,
    rounds: int,
    num_clients: int,
    sampled: int,
    dropout: float = 0.0,
    poisson: bool = False,
) -> ClientSchedule:
    """The clients of every round of a run (ClientSchedule: drawn lazily, round by round)."""
    return ClientSchedule(seed, range(rounds), num_clients, sampled, dropout, poisson)


def participation_counts(schedule: Iterable[list[int]], num_clients: int) -> list[int]:
    counts = [0] * num_clients
    for clients in schedule:
        for c in clients:
            counts[c] += 1
    return counts


def local_lr(params: AlgorithmConfig, round_idx: int, rounds: int) -> float:
    """eta_r, the local lr round r starts with: the schedule (constant | cosine | exp) over the
    rounds; with `lr_schedule_scope: local`, lr (the schedule then runs within each round)."""
    if params.lr_schedule_scope == "local":
        return params.lr
    return params.lr * schedule_factor(params.lr_schedule, params.lr_decay, round_idx, rounds)


def round_info(
    params: AlgorithmConfig,
    round_idx: int,
    lr: float,
    local_steps: int,
    num_clients: int,
    sampled: int,
) -> RoundInfo:
    """The RoundInfo of round r with lr = local_lr(...): with `lr_schedule_scope: local` it carries
    the schedule that RoundInfo.at_step applies over the K local steps."""
    info = RoundInfo(round_idx, lr, local_steps, num_clients, sampled)
    if params.lr_schedule_scope == "local" and params.lr_schedule != "constant":
        return replace(info, step_schedule=params.lr_schedule, step_decay=params.lr_decay)
    return info
