"""shards: the pathological non-IID split of McMahan et al. 2017 ("Communication-Efficient
Learning of Deep Networks from Decentralized Data", AISTATS), with its own parameter
partition.shards_per_client."""

from __future__ import annotations

import numpy as np

from fedbench.errors import FedbenchError
from fedbench.partitions.base import PartitionTask, reads
from fedbench.partitions.registry import PARTITIONS


@PARTITIONS.register("shards")
@reads("shards_per_client")
def shards(task: PartitionTask) -> list[np.ndarray]:
    """Label-sorted shards, shards_per_client of them per client (McMahan et al. 2017).

    The whole training set is sorted by label (ties in a seeded random order) and cut into
    N * shards_per_client equal shards of floor(n / (N * shards_per_client)) samples; each client
    gets shards_per_client of them at random (a shard lies in one class unless it straddles a
    class boundary, so a client with 2 shards sees 1 to 4 classes, mostly 2). With
    partition.samples_per_client below n / N, each client keeps a seeded random
    floor(samples_per_client / shards_per_client) of each of its shards: the shards still span
    the whole sorted set, so the federation still holds every class (cutting only the first
    N * samples_per_client sorted samples would hold the lowest classes only). Samples left
    over by the floors are not used."""
    labels, settings, rng = task.labels, task.settings, task.rng
    size = task.client_size()
    per_client = settings.shards_per_client
    shard = size // per_client
    if shard < 1:
        raise FedbenchError(
            f"partition.shards_per_client {per_client} exceeds the {size} samples per client; "
            "lower shards_per_client or clients"
        )
    shuffled = rng.permutation(task.n)
    by_label = shuffled[np.argsort(labels[shuffled], kind="stable")]
    total = settings.clients * per_client
    full = task.n // total  # >= shard, since size <= n // N
    cut = by_label[: total * full].reshape(total, full)
    owners = rng.permutation(total).reshape(settings.clients, per_client)
    if shard < full:  # drawn after the owners: without samples_per_client nothing changes
        kept = rng.permuted(np.tile(np.arange(full), (total, 1)), axis=1)[:, :shard]
        cut = np.take_along_axis(cut, kept, axis=1)
    return [np.sort(cut[own].reshape(-1)) for own in owners]
