"""Client batch order: B samples without replacement per step, reshuffled every local epoch.

The order of client i in round r depends only on (seed, round, client), so a resumed run, a
vectorised engine and a rerun all draw the same batches. All K batches are drawn at the start
of the client's round as one index tensor, so the local-step loop never waits on the host.
"""

from __future__ import annotations

import torch
from torch import Tensor


def client_seed(seed: int, round_idx: int, client: int) -> int:
    """A 63-bit seed derived from (seed, round, client) (SplitMix64-style mixing)."""
    z = (
        seed * 0x9E3779B97F4A7C15 + round_idx * 0xBF58476D1CE4E5B9 + client * 0x94D049BB133111EB
    ) & (2**64 - 1)
    z ^= z >> 31
    z = (z * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z ^= z >> 27
    return z & (2**63 - 1)


def batch_indices(
    samples: Tensor, local_steps: int, batch_size: int, generator: torch.Generator
) -> Tensor:
    """A (K, B) tensor of dataset indices for K local steps of a client holding `samples`.

    Batches are consecutive slices of a fresh permutation per local epoch; the incomplete tail of
    an epoch is dropped so no batch repeats a sample. B = 0 or B >= n_i means the whole local set.
    """
    n = samples.numel()
    if batch_size == 0 or batch_size >= n:
        return samples.view(1, n).expand(local_steps, n)
    per_epoch = n // batch_size
    epochs = -(-local_steps // per_epoch)
    perms = torch.stack([torch.randperm(n, generator=generator) for _ in range(epochs)])
    order = perms[:, : per_epoch * batch_size].reshape(-1, batch_size)[:local_steps]
    return samples[order.to(samples.device)]
