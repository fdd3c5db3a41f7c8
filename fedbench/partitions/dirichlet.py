"""dirichlet: FedAdamW's scheme (Hsu et al. 2019, "Measuring the Effects of Non-Identical Data
Distribution for Federated Visual Classification")."""

from __future__ import annotations

import numpy as np

from fedbench.partitions.base import PartitionTask, class_pools_and_mixes
from fedbench.partitions.registry import PARTITIONS


@PARTITIONS.register("dirichlet")
def dirichlet(task: PartitionTask) -> list[np.ndarray]:
    """Class mix p_c ~ Dir(alpha) per client, equal sizes, each sample used at most once.

    When a class runs out, the client's remaining draws renormalise over the classes that still
    have samples."""
    num_classes, rng = task.num_classes, task.rng
    size = task.client_size()
    pools, proportions = class_pools_and_mixes(task)
    left = np.array([len(p) for p in pools])
    taken = np.zeros(num_classes, dtype=np.int64)
    out = []
    for c in range(task.settings.clients):
        counts = np.zeros(num_classes, dtype=np.int64)
        need = size
        while need > 0:
            # Draw the remaining samples from p_c restricted to the classes still available;
            # draws that hit an exhausted class are redrawn in the next pass.
            avail = left > 0
            p = proportions[c] * avail
            p = p / p.sum() if p.sum() > 0 else avail / avail.sum()
            draw = np.minimum(rng.multinomial(need, p), left)
            counts += draw
            left -= draw
            need -= int(draw.sum())
        idx = [pools[k][taken[k] : taken[k] + counts[k]] for k in range(num_classes)]
        taken += counts
        out.append(np.sort(np.concatenate(idx)))
    return out
