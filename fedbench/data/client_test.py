"""Each client's own test data, for per-client evaluation (`eval.per_client`).

Two sources, in this order:
1. the dataset's per-client test split (`Dataset.client_test`, e.g. LEAF's per-user test data):
   client i's indices into x_test / y_test;
2. `partition.client_test_fraction` > 0: that fraction of each client's training samples, drawn
   with a seeded generator, is held out of its training data and becomes its local test set
   (as FL-bench and Flower's examples do). The held-out samples are never trained on, whether
   `eval.per_client` is on or not, so turning the evaluation on does not change the training.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from fedbench.config import RunConfig
from fedbench.data.base import Dataset
from fedbench.errors import FedbenchError


@dataclass(frozen=True)
class ClientTestSplit:
    #: "test": indices into x_test/y_test (the dataset's split); "train": held-out training samples.
    source: Literal["test", "train"]
    #: Client i's local test indices (possibly empty).
    indices: list[np.ndarray]


def hold_out(
    parts: list[np.ndarray], fraction: float, seed: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(train, local test) indices per client: round(fraction * n_i) samples of each client,
    keeping at least one for training; both parts stay sorted."""
    train: list[np.ndarray] = []
    test: list[np.ndarray] = []
    for client, part in enumerate(parts):
        held = min(int(np.floor(fraction * len(part) + 0.5)), max(len(part) - 1, 0))
        # One generator per client: a client's split does not depend on the others' sizes.
        rng = np.random.default_rng([seed, client])
        mask = np.zeros(len(part), dtype=bool)
        mask[rng.choice(len(part), size=held, replace=False)] = True
        train.append(np.sort(part[~mask]))
        test.append(np.sort(part[mask]))
    return train, test


def split_client_test(
    cfg: RunConfig, data: Dataset, parts: list[np.ndarray]
) -> tuple[list[np.ndarray], ClientTestSplit | None]:
    """The clients' training indices (after any hold-out) and their local test split, or None
    when there is none; a configuration that asks for what the data cannot give is an error."""
    fraction = cfg.partition.client_test_fraction
    provided = data.client_test
    if provided is not None:
        if fraction > 0:
            raise FedbenchError(
                f"dataset {data.name} has its own per-client test splits; drop "
                "partition.client_test_fraction (it would hold out training samples too)"
            )
        if len(provided) != len(parts):
            raise FedbenchError(
                f"dataset {data.name} gives test splits for {len(provided)} clients but the "
                f"partition has {len(parts)}; use partition.kind: natural"
            )
        return parts, ClientTestSplit("test", [np.asarray(i) for i in provided])
    if fraction > 0:
        train, test = hold_out(parts, fraction, cfg.partition.seed)
        return train, ClientTestSplit("train", test)
    if cfg.eval.per_client:
        raise FedbenchError(
            f"eval.per_client needs each client's own test data: dataset {data.name} has no "
            "per-client test split; set partition.client_test_fraction (e.g. 0.2)"
        )
    return parts, None
