"""iid: no heterogeneity, the baseline every non-IID split is compared with."""

from __future__ import annotations

import numpy as np

from fedbench.partitions.base import PartitionTask, reads
from fedbench.partitions.registry import PARTITIONS


@PARTITIONS.register("iid")
@reads()
def iid(task: PartitionTask) -> list[np.ndarray]:
    """A seeded shuffle cut into equal parts, each sample used at most once."""
    size = task.client_size()
    perm = task.rng.permutation(task.n)
    return [np.sort(perm[c * size : (c + 1) * size]) for c in range(task.settings.clients)]
