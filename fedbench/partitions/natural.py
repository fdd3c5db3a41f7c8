"""natural: the clients the data comes with (LEAF's users, an npz file's client_train)."""

from __future__ import annotations

import numpy as np

from fedbench.errors import FedbenchError
from fedbench.partitions.base import PartitionTask, reads
from fedbench.partitions.registry import PARTITIONS


@PARTITIONS.register("natural")
@reads()
def natural(task: PartitionTask) -> list[np.ndarray]:
    """The client ids shipped with the data; partition.clients must equal their number."""
    client_ids = task.client_ids
    if client_ids is None:
        raise FedbenchError(
            "partition.kind natural needs client ids in the data (npz: client_train)"
        )
    ids = np.unique(client_ids)
    if len(ids) != task.settings.clients:
        raise FedbenchError(
            f"partition.clients is {task.settings.clients} but the data has {len(ids)} natural "
            f"clients; set partition.clients={len(ids)}"
        )
    # One stable sort instead of a scan per client: thousands of clients stay cheap.
    order = np.argsort(client_ids, kind="stable")
    bounds = np.searchsorted(client_ids[order], ids[1:])
    return np.split(order, bounds)
