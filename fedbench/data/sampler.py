"""Client batch order: B samples without replacement per step, reshuffled every local epoch.

The order of client i in round r depends only on (seed, round, client), so a resumed run, a
vectorised engine and a rerun all draw the same batches. They are drawn one local epoch at a time
(one index tensor per epoch, moved to the device at once), so memory does not grow with K: a
client of K = 10**9 local steps holds one permutation of its samples, not K batches.
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


class BatchOrder:
    """The K batches of dataset indices of a client holding `samples`: `order[k]` (k = 0..K-1)
    is a (B,) tensor, read in increasing k.

    Batches are consecutive slices of a fresh permutation per local epoch; the incomplete tail of
    an epoch is dropped so no batch repeats a sample. B = 0 or B >= n_i means the whole local set.

    The permutations are the ones a single up-front draw from `generator` gives (epoch e is the
    e-th `randperm` from it), drawn from a copy of its state when their epoch starts. With
    `advance` (when the caller draws from the generator afterwards: the augmentation of each
    batch) the generator is moved to where that up-front draw leaves it, so those draws are
    unchanged too; without, K = 10**9 steps cost nothing up front.
    """

    def __init__(
        self,
        samples: Tensor,
        local_steps: int,
        batch_size: int,
        generator: torch.Generator,
        advance: bool = True,
    ) -> None:
        self.samples, self.local_steps = samples, local_steps
        n = samples.numel()
        self.whole = batch_size == 0 or batch_size >= n
        self.batch_size = n if self.whole else batch_size
        self.per_epoch = 1 if self.whole else n // batch_size
        self._epoch = -1
        self._rows = samples.view(1, n)
        if self.whole:
            return
        self._draw = torch.Generator()
        self._draw.set_state(generator.get_state())
        for _ in range(-(-local_steps // self.per_epoch) if advance else 0):
            torch.randperm(n, generator=generator)  # past this order's draws

    @property
    def shape(self) -> tuple[int, int]:
        return (self.local_steps, self.batch_size)

    def __len__(self) -> int:
        return self.local_steps

    def __getitem__(self, k: int) -> Tensor:
        if not 0 <= k < self.local_steps:
            raise IndexError(f"local step {k} of {self.local_steps}")
        if self.whole:
            return self.samples
        epoch, i = divmod(k, self.per_epoch)
        if epoch != self._epoch:
            if epoch < self._epoch:
                raise IndexError(f"local step {k}: epoch {epoch} is behind (read in order)")
            while self._epoch < epoch:  # one randperm per epoch, skipped ones included
                perm = torch.randperm(self.samples.numel(), generator=self._draw)
                self._epoch += 1
            kept = perm[: self.per_epoch * self.batch_size].view(self.per_epoch, self.batch_size)
            self._rows = self.samples[kept.to(self.samples.device)]
        return self._rows[i]


def batch_indices(
    samples: Tensor,
    local_steps: int,
    batch_size: int,
    generator: torch.Generator,
    advance: bool = True,
) -> BatchOrder:
    """The K batches of a client (see BatchOrder), drawn one local epoch at a time."""
    return BatchOrder(samples, local_steps, batch_size, generator, advance)
