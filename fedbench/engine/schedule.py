"""Who trains when, and with which learning rate (docs/algorithms.md, "The shared round")."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import overload

import numpy as np

from fedbench.algorithms.base import RoundInfo
from fedbench.algorithms.params import AlgorithmConfig, schedule_factor


def clients_per_round(participation: float, num_clients: int) -> int:
    """S = max(1, round(participation * N))."""
    return max(1, round(participation * num_clients))


def sampled_clients(seed: int, round_idx: int, num_clients: int, sampled: int) -> list[int]:
    """The clients of round r: uniform without replacement from a generator seeded by (seed, r)."""
    rng = np.random.default_rng([seed, round_idx])
    return sorted(int(c) for c in rng.choice(num_clients, size=sampled, replace=False))


class ClientSchedule(Sequence[list[int]]):
    """The whole schedule, known before training (DP accounting and resume rely on it), drawn
    round by round when asked: `schedule[r]` is `sampled_clients(seed, r, ...)`, so memory does not
    grow with the number of rounds (a run of 10**9 rounds starts at once) and any round can be
    read without the ones before it (a resumed run). `schedule[:r]` is the first r rounds."""

    def __init__(self, seed: int, rounds: range, num_clients: int, sampled: int) -> None:
        self.seed, self.rounds, self.num_clients, self.sampled = seed, rounds, num_clients, sampled

    def __len__(self) -> int:
        return len(self.rounds)

    @overload
    def __getitem__(self, index: int) -> list[int]: ...
    @overload
    def __getitem__(self, index: slice) -> ClientSchedule: ...
    def __getitem__(self, index: int | slice) -> list[int] | ClientSchedule:
        if isinstance(index, slice):
            return ClientSchedule(self.seed, self.rounds[index], self.num_clients, self.sampled)
        return sampled_clients(self.seed, self.rounds[index], self.num_clients, self.sampled)

    def __iter__(self) -> Iterator[list[int]]:
        for r in self.rounds:
            yield sampled_clients(self.seed, r, self.num_clients, self.sampled)


def client_schedule(seed: int, rounds: int, num_clients: int, sampled: int) -> ClientSchedule:
    """The clients of every round of a run (ClientSchedule: drawn lazily, round by round)."""
    return ClientSchedule(seed, range(rounds), num_clients, sampled)


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
    if params.lr_schedule_scope == "local" and params.lr_schedule != "constant":
        return RoundInfo(
            round_idx,
            lr,
            local_steps,
            num_clients,
            sampled,
            step_schedule=params.lr_schedule,
            step_decay=params.lr_decay,
        )
    return RoundInfo(round_idx, lr, local_steps, num_clients, sampled)
