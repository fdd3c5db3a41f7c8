"""Splitting the training set over clients (numpy, seeded by partition.seed only).

`partition.kind` names a kind registered in `fedbench.partitions.PARTITIONS` (one module per
kind: dirichlet, dirichlet_equal, dirichlet_label, iid, natural, shards; `fedbench list
partitions`); this module applies it and writes the result as partition.json.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from fedbench.config import PartitionConfig
from fedbench.partitions import PARTITIONS, PartitionTask


def partition(
    labels: np.ndarray,
    cfg: PartitionConfig,
    num_classes: int,
    client_ids: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Indices of each client's training samples (sorted), one array per client."""
    split = PARTITIONS.get(cfg.kind)
    rng = np.random.default_rng(cfg.seed)
    return split(PartitionTask(labels, num_classes, cfg, rng, client_ids))


def _client_record(c: int, idx: np.ndarray, labels: np.ndarray, num_classes: int) -> dict:
    return {
        "id": c,
        "n": len(idx),
        "class_counts": np.bincount(labels[idx], minlength=num_classes).tolist(),
    }


def class_counts(parts: list[np.ndarray], labels: np.ndarray, num_classes: int) -> np.ndarray:
    """Each client's training samples per class (N x C, int64; partition.json's class_counts)."""
    return np.stack([np.bincount(labels[idx], minlength=num_classes) for idx in parts])


def describe(parts: list[np.ndarray], labels: np.ndarray, num_classes: int) -> dict:
    """The content of partition.json."""
    return {"clients": [_client_record(c, idx, labels, num_classes) for c, idx in enumerate(parts)]}


def write_partition(
    path: Path, parts: list[np.ndarray], labels: np.ndarray, num_classes: int
) -> None:
    """partition.json (the content of `describe`) written one client per line, atomically: a
    federation of thousands of clients never holds the whole document in memory."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w") as fh:
            fh.write('{"clients": [\n')
            for c, idx in enumerate(parts):
                sep = ",\n" if c else ""
                fh.write(sep + json.dumps(_client_record(c, idx, labels, num_classes)))
            fh.write("\n]}\n")
        os.replace(tmp, path)
    except BaseException:  # a full disk: no half-written temp file stays behind
        tmp.unlink(missing_ok=True)
        raise
