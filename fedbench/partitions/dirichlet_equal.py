"""dirichlet_equal: FedDyn's scheme (Acar et al., ICLR 2021), which the FedAdamom code uses."""

from __future__ import annotations

import numpy as np

from fedbench.partitions.base import PartitionTask, class_pools_and_mixes
from fedbench.partitions.registry import PARTITIONS


@PARTITIONS.register("dirichlet_equal")
def dirichlet_equal(task: PartitionTask) -> list[np.ndarray]:
    """Class mix p_c ~ Dir(alpha), exactly n/N samples per client, samples reused (FedDyn).

    Client c's class counts ~ Multinomial(size, p_c) with size samples_per_client (else n/N);
    each class pool is consumed in a seeded shuffled order and restarts from its beginning when
    it runs out, so samples are reused rather than the mix renormalised."""
    num_classes, clients, rng = task.num_classes, task.settings.clients, task.rng
    size = task.client_size(reuse=True)
    pools, proportions = class_pools_and_mixes(task)
    proportions *= np.array([len(p) > 0 for p in pools])  # no mass on an absent class
    proportions /= proportions.sum(axis=1, keepdims=True)
    counts = np.stack([rng.multinomial(size, p) for p in proportions])
    cursor = np.zeros(num_classes, dtype=np.int64)
    out: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * clients
    # FedDyn draws sample by sample for a random client; visiting the clients in a random order
    # and taking each class's samples from a cyclic cursor gives the same reuse pattern.
    for c in rng.permutation(clients):
        idx = []
        for k in np.flatnonzero(counts[c]):
            take = (cursor[k] + np.arange(counts[c, k])) % len(pools[k])
            cursor[k] += counts[c, k]
            idx.append(pools[k][take])
        out[c] = np.sort(np.concatenate(idx))
    return out
