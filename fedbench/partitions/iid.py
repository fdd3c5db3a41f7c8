"""iid: no heterogeneity, the baseline every non-IID split is compared with."""

from __future__ import annotations

import numpy as np

from fedbench.partitions.base import PartitionSettings, client_size
from fedbench.partitions.registry import PARTITIONS


@PARTITIONS.register("iid")
def iid(
    labels: np.ndarray,
    num_classes: int,
    settings: PartitionSettings,
    rng: np.random.Generator,
    client_ids: np.ndarray | None,
) -> list[np.ndarray]:
    """A seeded shuffle cut into equal parts, each sample used at most once."""
    size = client_size(len(labels), settings)
    perm = rng.permutation(len(labels))
    return [np.sort(perm[c * size : (c + 1) * size]) for c in range(settings.clients)]
