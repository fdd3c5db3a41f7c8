"""Who trains when, and with which learning rate (docs/algorithms.md, "The shared round")."""

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


#: Salts of the per-(seed, round, client) draws, so that they are independent of each other and
#: of the client's batch order.
_DROPOUT_SALT, _STEPS_SALT = 0x0D, 0x5E


def drops_out(seed: int, round_idx: int, client: int, dropout: float) -> bool:
    """Whether the sampled client drops out of round r (probability `dropout`)."""
    if dropout <= 0.0:
        return False
    return bool(np.random.default_rng([seed, round_idx, client, _DROPOUT_SALT]).random() < dropout)


def round_clients(
    seed: int, round_idx: int, num_clients: int, sampled: int, dropout: float = 0.0
) -> list[int]:
    """The clients that train in round r: the sampled ones less those that drop out."""
    chosen = sampled_clients(seed, round_idx, num_clients, sampled)
    return [c for c in chosen if not drops_out(seed, round_idx, c, dropout)]


def client_local_steps(
    seed: int, round_idx: int, client: int, local_steps: int, local_steps_min: int | None
) -> int:
    """K_i of the client in round r: local_steps, or uniform over local_steps_min..local_steps."""
    if local_steps_min is None or local_steps_min == local_steps:
        return local_steps
    rng = np.random.default_rng([seed, round_idx, client, _STEPS_SALT])
    return int(rng.integers(local_steps_min, local_steps + 1))


def client_schedule(
    seed: int, rounds: int, num_clients: int, sampled: int, dropout: float = 0.0
) -> list[list[int]]:
    """The whole schedule, known before training (DP accounting and resume rely on it)."""
    return [round_clients(seed, r, num_clients, sampled, dropout) for r in range(rounds)]


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
