"""Who trains when, and with which learning rate (ALGORITHMS.md, "Notation and the shared round")."""

from __future__ import annotations

import math

import numpy as np

from fedbench.algorithms.params import AlgorithmConfig


def clients_per_round(participation: float, num_clients: int) -> int:
    """S = max(1, round(participation * N))."""
    return max(1, round(participation * num_clients))


def sampled_clients(seed: int, round_idx: int, num_clients: int, sampled: int) -> list[int]:
    """The clients of round r: uniform without replacement from a generator seeded by (seed, r)."""
    rng = np.random.default_rng([seed, round_idx])
    return sorted(int(c) for c in rng.choice(num_clients, size=sampled, replace=False))


def client_schedule(seed: int, rounds: int, num_clients: int, sampled: int) -> list[list[int]]:
    """The whole schedule, known before training (DP accounting and resume rely on it)."""
    return [sampled_clients(seed, r, num_clients, sampled) for r in range(rounds)]


def participation_counts(schedule: list[list[int]], num_clients: int) -> list[int]:
    counts = [0] * num_clients
    for clients in schedule:
        for c in clients:
            counts[c] += 1
    return counts


def local_lr(params: AlgorithmConfig, round_idx: int, rounds: int) -> float:
    """eta_r: constant within a round; constant | cosine | exp schedules."""
    if params.lr_schedule == "cosine":
        return params.lr * 0.5 * (1.0 + math.cos(math.pi * round_idx / rounds))
    if params.lr_schedule == "exp":
        return params.lr * params.lr_decay**round_idx
    return params.lr
