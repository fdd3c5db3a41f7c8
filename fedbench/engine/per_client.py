"""Per-client evaluation (`eval.per_client`): the global model on each sampled client's own test
data, summarised as mean / worst 10% / standard deviation across clients (as FL-bench and
Flower report personalisation and fairness)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

from fedbench.engine.evaluate import evaluate
from fedbench.engine.setup import RunSetup

#: The share of clients whose mean is the "worst" summary (at least one client).
WORST_SHARE = 0.1
#: The summaries of a per-client metric, in summarise's order (client_acc_mean, ...).
STATS = ("mean", "worst10", "std")


def summarise(values: list[float], higher_is_better: bool) -> tuple[float, float, float]:
    """(mean, mean of the worst ceil(10%) clients, population std) of per-client values."""
    arr = np.asarray(values, dtype=np.float64)
    k = max(1, math.ceil(WORST_SHARE * len(arr)))
    ordered = np.sort(arr) if higher_is_better else np.sort(arr)[::-1]
    return float(arr.mean()), float(ordered[:k].mean()), float(arr.std())


def client_test_data(setup: RunSetup, client: int) -> tuple[Tensor, Tensor] | None:
    """The client's own test data (x, y) on the device; None when its split is empty."""
    split = setup.client_test
    assert split is not None, "prepare_run refuses a per-client evaluation without a test split"
    idx = split.indices[client]
    if len(idx) == 0:
        return None
    data = setup.data
    test = split.source == "test"
    x_all, y_all = (data.x_test, data.y_test) if test else (data.x_train, data.y_train)
    t = torch.as_tensor(idx, dtype=torch.int64, device=x_all.device)
    return x_all[t], y_all[t]


def per_client_metrics(setup: RunSetup, clients: list[int], batch_size: int) -> dict[str, Any]:
    """client_acc_{mean,worst10,std}, client_loss_{mean,worst10,std} and clients_evaluated over
    `clients` (those with an empty local test set are left out), for the model as loaded."""
    accs: list[float] = []
    losses: list[float] = []
    for client in clients:
        found = client_test_data(setup, client)
        if found is None:
            continue
        acc, loss = evaluate(setup.model, *found, batch_size, setup.prepare, setup.data.metric)
        accs.append(acc)
        losses.append(loss)
    row: dict[str, Any] = {"clients_evaluated": len(accs)}
    for metric, values, higher in (("acc", accs, True), ("loss", losses, False)):
        stats = summarise(values, higher) if values else (None,) * 3
        row.update({f"client_{metric}_{n}": v for n, v in zip(STATS, stats, strict=True)})
    return row
