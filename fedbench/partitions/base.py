"""The partition contract: what a kind receives and returns, and the checks kinds share.

A kind is a function `split(task: PartitionTask)` returning one array of training-sample
indices per client. `task.settings` is the run config's `partition:` section, read through the
`PartitionSettings` protocol so that this package needs nothing from `fedbench.config` (which
validates `partition.kind` against the registry, and so sits above it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from fedbench.errors import FedbenchError


class PartitionSettings(Protocol):
    """The fields of the `partition:` section a kind may read."""

    @property
    def kind(self) -> str: ...
    @property
    def alpha(self) -> float: ...
    @property
    def clients(self) -> int: ...
    @property
    def samples_per_client(self) -> int | None: ...
    @property
    def seed(self) -> int: ...
    @property
    def shards_per_client(self) -> int: ...


@dataclass(frozen=True)
class PartitionTask:
    """What a partition kind is given: the training labels, the number of classes, the
    `partition:` section, a generator seeded by partition.seed only (the same split for every
    run seed), and the data's natural client of each training sample (None when it has none).
    One object rather than a parameter list, so that the contract can grow without touching
    every kind."""

    labels: np.ndarray
    num_classes: int
    settings: PartitionSettings
    rng: np.random.Generator
    client_ids: np.ndarray | None = None

    @property
    def n(self) -> int:
        """Training samples."""
        return len(self.labels)

    def check_clients(self) -> None:
        """`check_clients` for this task."""
        check_clients(self.n, self.settings)

    def client_size(self, *, reuse: bool = False) -> int:
        """`client_size` for this task."""
        return client_size(self.n, self.settings, reuse=reuse)


#: A partition kind: the sorted training-sample indices of each client, one array each.
Split = Callable[[PartitionTask], list[np.ndarray]]

#: The `partition:` settings that only some kinds read. A kind names those it reads with
#: `@reads(...)`; the others do not act on its runs, so they neither name nor hash them (run ids)
#: and no report states them.
KIND_SETTINGS = ("alpha", "shards_per_client")
#: What a kind that declares nothing reads (the kinds written before the declaration: Dirichlet).
DEFAULT_READS = frozenset({"alpha"})


def reads(*settings: str) -> Callable[[Split], Split]:
    """Declare the KIND_SETTINGS a partition kind reads (`@reads("shards_per_client")` under
    `@PARTITIONS.register`)."""
    unknown = set(settings) - set(KIND_SETTINGS)
    if unknown:
        raise ValueError(f"reads(): {sorted(unknown)} are not among {KIND_SETTINGS}")

    def mark(split: Split) -> Split:
        setattr(split, "reads", frozenset(settings))  # noqa: B010 (a function's attribute)
        return split

    return mark


def settings_read(split: Split) -> frozenset[str]:
    """The KIND_SETTINGS `split` reads: as declared with @reads, else DEFAULT_READS."""
    declared = getattr(split, "reads", None)
    return declared if isinstance(declared, frozenset) else DEFAULT_READS


def check_clients(n: int, settings: PartitionSettings) -> None:
    """A split over more clients than samples is an error of the config."""
    if settings.clients > n:
        raise FedbenchError(
            f"partition.clients is {settings.clients} but the training set has only {n} samples"
        )


def client_size(n: int, settings: PartitionSettings, *, reuse: bool = False) -> int:
    """Samples per client: partition.samples_per_client, else n // clients. Unless the kind
    reuses samples (`reuse`), the clients together may not need more than the n samples."""
    check_clients(n, settings)
    size = settings.samples_per_client or n // settings.clients
    if not reuse and size * settings.clients > n:
        raise FedbenchError(
            f"partition.samples_per_client {size} x {settings.clients} clients exceeds the {n} "
            "training samples; lower samples_per_client or clients"
        )
    if reuse and size * settings.clients > MAX_REUSE * n:
        raise FedbenchError(
            f"partition.samples_per_client {size:,} x {settings.clients} clients is "
            f"{size * settings.clients:,} samples, more than {MAX_REUSE} times the {n:,} "
            "training samples (each would be reused that often); lower samples_per_client"
        )
    return size


#: How often a partition that reuses samples (dirichlet_equal) may use each one, on average.
MAX_REUSE = 100


def class_pools_and_mixes(task: PartitionTask) -> tuple[list[np.ndarray], np.ndarray]:
    """Each class's sample indices in a seeded shuffled order, then each client's class mix
    p_c ~ Dir(alpha) (a clients x num_classes array), drawn in this order from `task.rng`."""
    labels, num_classes, rng = task.labels, task.num_classes, task.rng
    pools = [rng.permutation(np.flatnonzero(labels == k)) for k in range(num_classes)]
    mixes = rng.dirichlet(np.full(num_classes, task.settings.alpha), size=task.settings.clients)
    return pools, mixes
