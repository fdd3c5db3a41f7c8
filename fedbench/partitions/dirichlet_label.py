"""dirichlet_label: the label-wise Dirichlet split of NIID-Bench (Li et al., ICDE 2022) and
Flower's DirichletPartitioner."""

from __future__ import annotations

import numpy as np

from fedbench.partitions.base import PartitionTask
from fedbench.partitions.registry import PARTITIONS

#: dirichlet_label redraws at most this many times before repairing the smallest clients.
MAX_REDRAWS = 100


@PARTITIONS.register("dirichlet_label")
def dirichlet_label(task: PartitionTask) -> list[np.ndarray]:
    """Each class split over the clients ~ Dir(alpha); unequal client sizes (NIID-Bench).

    A draw that leaves a client with fewer than min(10, n / 2N) samples is redrawn."""
    labels, num_classes, rng = task.labels, task.num_classes, task.rng
    n, clients, alpha = task.n, task.settings.clients, task.settings.alpha
    task.check_clients()
    min_size = max(1, min(10, n // (2 * clients)))
    for _ in range(MAX_REDRAWS):
        parts: list[list[np.ndarray]] = [[] for _ in range(clients)]
        for k in range(num_classes):
            idx = rng.permutation(np.flatnonzero(labels == k))
            shares = rng.dirichlet(np.full(clients, alpha))
            cuts = (np.cumsum(shares) * len(idx)).astype(int)[:-1]
            for c, chunk in enumerate(np.split(idx, cuts)):
                parts[c].append(chunk)
        out = [np.concatenate(p) for p in parts]
        if min(len(o) for o in out) >= min_size:
            return [np.sort(o) for o in out]
    # Still too small after MAX_REDRAWS draws (tiny alpha, many clients): move samples from the
    # largest clients to the smallest so the guard terminates.
    lists = [list(o) for o in out]
    for small in sorted(range(clients), key=lambda c: len(lists[c])):
        while len(lists[small]) < min_size:
            big = max(range(clients), key=lambda c: len(lists[c]))
            lists[small].append(lists[big].pop())
    return [np.sort(np.array(o, dtype=np.int64)) for o in lists]
