"""The summaries of a per-client metric across clients (the personalised protocol's columns,
docs/personalised.md): mean, sample-weighted mean, population std and 10th percentile."""

from __future__ import annotations

import numpy as np

#: The summaries, in `summarise`'s order: the column suffixes (personal_acc_mean, ...).
STATS = ("mean", "wmean", "std", "p10")
#: The protocol's accuracy columns (fedbench.personal.evaluate): each client's personalised
#: model before and after the method's fine-tuning, and the clients that never trained.
COLUMNS = ("personal_acc", "personal_ft_acc", "unseen_acc")
#: Their summaries as metrics a table reports (`metrics: [personal_acc_mean, ...]`).
PERSONAL_METRICS = tuple(f"{column}_{stat}" for column in COLUMNS for stat in STATS)
#: Report labels of the summaries and columns.
STAT_LABELS = {"mean": "mean", "wmean": "w. mean", "std": "std", "p10": "p10"}
COLUMN_LABELS = {
    "personal_acc": "pers. acc",
    "personal_ft_acc": "pers.+FT acc",
    "unseen_acc": "unseen acc",
}

#: The percentile that measures fairness: the accuracy below which the worst 10% of clients
#: fall (pFL-Bench's "bottom decile"; numpy's linear interpolation between order statistics).
PERCENTILE = 10.0


def summarise(values: list[float], weights: list[float]) -> dict[str, float]:
    """{mean, wmean, std, p10} of per-client `values`: the plain mean over clients, the mean
    weighted by `weights` (each client's test samples: the accuracy of all clients' test
    samples pooled), the population std (ddof 0) and the 10th percentile."""
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    return {
        "mean": float(v.mean()),
        "wmean": float((v * w).sum() / w.sum()),
        "std": float(v.std()),
        "p10": float(np.percentile(v, PERCENTILE)),
    }
