"""Splitting the training set over clients (numpy, seeded by partition.seed only).

- dirichlet (FedAdamW's scheme, Hsu et al. 2019): client c's class mix p_c ~ Dir(alpha), equal
  client sizes, every sample used at most once; when a class runs out, the client's remaining
  draws renormalise over the classes that still have samples.
- dirichlet_equal (FedDyn's scheme, which the FedAdamom code uses): client c's class mix
  p_c ~ Dir(alpha), every client exactly n/N samples (or samples_per_client), its class counts
  ~ Multinomial(size, p_c); each class pool is consumed in a seeded shuffled order and restarts
  from its beginning when it runs out, so samples are reused rather than the mix renormalised.
- dirichlet_label (NIID-Bench / Flower): each class split over clients ~ Dir(alpha); unequal sizes.
- iid: a seeded shuffle cut into equal parts.
- natural: the client ids shipped with the data.
- shards (McMahan et al. 2017, the pathological non-IID split): the training set sorted by label
  (ties in a seeded random order) and cut into N * shards_per_client equal shards; each client
  gets shards_per_client of them at random (a shard lies in one class unless it straddles a
  class boundary, so a client with 2 shards sees 1 to 4 classes, mostly 2). Shards hold
  floor(size / shards_per_client) samples; the samples left over are not used.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from fedbench.config import PartitionConfig
from fedbench.errors import FedbenchError

#: dirichlet_label redraws at most this many times before repairing the smallest clients.
MAX_REDRAWS = 100


def partition(
    labels: np.ndarray,
    cfg: PartitionConfig,
    num_classes: int,
    client_ids: np.ndarray | None = None,
) -> list[np.ndarray]:
    """Indices of each client's training samples (sorted), one array per client."""
    rng = np.random.default_rng(cfg.seed)
    n = len(labels)
    if cfg.kind == "natural":
        return _natural(cfg, client_ids)
    if cfg.clients > n:
        raise FedbenchError(
            f"partition.clients is {cfg.clients} but the training set has only {n} samples"
        )
    size = cfg.samples_per_client or n // cfg.clients
    # dirichlet_equal reuses samples, so it may ask for more than n in total.
    if cfg.kind in ("dirichlet", "iid", "shards") and size * cfg.clients > n:
        raise FedbenchError(
            f"partition.samples_per_client {size} x {cfg.clients} clients exceeds the {n} training "
            "samples; lower samples_per_client or clients"
        )
    if cfg.kind == "iid":
        perm = rng.permutation(n)
        return [np.sort(perm[c * size : (c + 1) * size]) for c in range(cfg.clients)]
    if cfg.kind == "dirichlet":
        return _dirichlet(labels, num_classes, cfg.clients, size, cfg.alpha, rng)
    if cfg.kind == "dirichlet_equal":
        return _dirichlet_equal(labels, num_classes, cfg.clients, size, cfg.alpha, rng)
    if cfg.kind == "shards":
        return _shards(labels, cfg.clients, cfg.shards_per_client, size, rng)
    return _dirichlet_label(labels, num_classes, cfg.clients, cfg.alpha, rng)


def _dirichlet(
    labels: np.ndarray,
    num_classes: int,
    clients: int,
    size: int,
    alpha: float,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    pools = [rng.permutation(np.flatnonzero(labels == k)) for k in range(num_classes)]
    left = np.array([len(p) for p in pools])
    taken = np.zeros(num_classes, dtype=np.int64)
    proportions = rng.dirichlet(np.full(num_classes, alpha), size=clients)
    out = []
    for c in range(clients):
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


def _dirichlet_equal(
    labels: np.ndarray,
    num_classes: int,
    clients: int,
    size: int,
    alpha: float,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    pools = [rng.permutation(np.flatnonzero(labels == k)) for k in range(num_classes)]
    present = np.array([len(p) > 0 for p in pools])
    proportions = rng.dirichlet(np.full(num_classes, alpha), size=clients) * present
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


def _shards(
    labels: np.ndarray, clients: int, per_client: int, size: int, rng: np.random.Generator
) -> list[np.ndarray]:
    shard = size // per_client
    if shard < 1:
        raise FedbenchError(
            f"partition.shards_per_client {per_client} exceeds the {size} samples per client; "
            "lower shards_per_client or clients"
        )
    shuffled = rng.permutation(len(labels))
    by_label = shuffled[np.argsort(labels[shuffled], kind="stable")]
    total = clients * per_client
    shards = by_label[: total * shard].reshape(total, shard)
    owners = rng.permutation(total).reshape(clients, per_client)
    return [np.sort(shards[own].reshape(-1)) for own in owners]


def _dirichlet_label(
    labels: np.ndarray, num_classes: int, clients: int, alpha: float, rng: np.random.Generator
) -> list[np.ndarray]:
    n = len(labels)
    min_size = max(1, min(10, n // (2 * clients)))
    for _ in range(MAX_REDRAWS):
        parts: list[list[np.ndarray]] = [[] for _ in range(clients)]
        for k in range(num_classes):
            idx = rng.permutation(np.flatnonzero(labels == k))
            cuts = (np.cumsum(rng.dirichlet(np.full(clients, alpha))) * len(idx)).astype(int)[:-1]
            for c, chunk in enumerate(np.split(idx, cuts)):
                parts[c].append(chunk)
        out = [np.concatenate(p) for p in parts]
        if min(len(o) for o in out) >= min_size:
            return [np.sort(o) for o in out]
    # Still too small after MAX_REDRAWS draws (tiny alpha, many clients): move samples from the
    # largest clients to the smallest so the guard terminates.
    out = [list(o) for o in out]
    for small in sorted(range(clients), key=lambda c: len(out[c])):
        while len(out[small]) < min_size:
            big = max(range(clients), key=lambda c: len(out[c]))
            out[small].append(out[big].pop())
    return [np.sort(np.array(o, dtype=np.int64)) for o in out]


def _natural(cfg: PartitionConfig, client_ids: np.ndarray | None) -> list[np.ndarray]:
    if client_ids is None:
        raise FedbenchError(
            "partition.kind natural needs client ids in the data (npz: client_train)"
        )
    ids = np.unique(client_ids)
    if len(ids) != cfg.clients:
        raise FedbenchError(
            f"partition.clients is {cfg.clients} but the data has {len(ids)} natural clients; "
            f"set partition.clients={len(ids)}"
        )
    # One stable sort instead of a scan per client: thousands of clients stay cheap.
    order = np.argsort(client_ids, kind="stable")
    bounds = np.searchsorted(client_ids[order], ids[1:])
    return np.split(order, bounds)


def _client_record(c: int, idx: np.ndarray, labels: np.ndarray, num_classes: int) -> dict:
    return {
        "id": c,
        "n": len(idx),
        "class_counts": np.bincount(labels[idx], minlength=num_classes).tolist(),
    }


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
