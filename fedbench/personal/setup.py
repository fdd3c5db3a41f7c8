"""What a run of the personalised protocol needs, checked when the run is prepared: each
client's own test data, and the clients held out of training (`eval.unseen_clients`)."""

from __future__ import annotations

import numpy as np

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.personal import PersonalAlgorithm
from fedbench.config import RunConfig
from fedbench.data.client_test import ClientTestSplit
from fedbench.errors import FedbenchError

#: Salt of the unseen clients' draw (independent of the partition's own draws).
_UNSEEN_SALT = 0x0E


def unseen_clients(fraction: float, num_clients: int, partition_seed: int) -> list[int]:
    """round(fraction * N) clients drawn uniformly from a generator of (partition seed, salt):
    the same clients for every method and run seed of a table over one partition, so that the
    rows are paired on the same clients."""
    count = int(np.floor(fraction * num_clients + 0.5))
    if count == 0:
        return []
    rng = np.random.default_rng([partition_seed, _UNSEEN_SALT])
    return sorted(int(c) for c in rng.choice(num_clients, size=count, replace=False))


def personal_setup(
    cfg: RunConfig, algorithm: Algorithm, num_clients: int, client_test: ClientTestSplit | None
) -> list[int]:
    """The unseen clients of the run; a configuration the protocol cannot run is an error."""
    personal = cfg.eval.personal or isinstance(algorithm, PersonalAlgorithm)
    fraction = cfg.eval.unseen_clients
    if fraction > 0 and not personal:
        raise FedbenchError(
            "eval.unseen_clients holds clients out for the personalised protocol; set "
            "eval.personal: true as well"
        )
    if personal and client_test is None:
        raise FedbenchError(
            f"the personalised evaluation ({cfg.algorithm.name}, eval.personal) tests each "
            "client on its own test data: set partition.client_test_fraction (e.g. 0.2)"
        )
    if fraction > 0 and cfg.privacy is not None and cfg.privacy.level == "client":
        raise FedbenchError(
            "eval.unseen_clients with client-level DP: the accountant samples from every "
            "client; drop one of the two"
        )
    unseen = unseen_clients(fraction, num_clients, cfg.partition.seed)
    if unseen and len(unseen) >= num_clients:
        raise FedbenchError(
            f"eval.unseen_clients {fraction} holds out all {num_clients} clients; use less"
        )
    return unseen
