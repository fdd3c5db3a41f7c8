"""Evaluation protocol (docs/algorithms.md, "Evaluation protocol"): test accuracy on the whole test set and training loss on
a fixed seeded subset, in eval mode, without augmentation, in large batches under inference_mode."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor, nn

from fedbench.step import Objective


def train_subset_indices(n_train: int, subset: int, seed: int) -> np.ndarray:
    """The fixed training subset on which train_loss is measured (0 = the whole set)."""
    if subset == 0 or subset >= n_train:
        return np.arange(n_train)
    return np.sort(np.random.default_rng(seed).choice(n_train, size=subset, replace=False))


@torch.inference_mode()
def evaluate(
    model: nn.Module,
    x: Tensor,
    y: Tensor,
    batch_size: int,
    prepare: Callable[[Tensor], Tensor] | None = None,
    metric: str = "accuracy",
) -> tuple[float, float]:
    """(accuracy in %, mean cross-entropy) of `model` on (x, y); with metric "mcc" the first
    value is the Matthews correlation x 100 (GLUE CoLA)."""
    was_training = model.training
    model.eval()
    loss_sum = torch.zeros((), dtype=torch.float64, device=x.device)
    correct = torch.zeros((), dtype=torch.int64, device=x.device)
    predictions: list[Tensor] = []
    for start in range(0, len(y), batch_size):
        xb, yb = x[start : start + batch_size], y[start : start + batch_size]
        if prepare is not None:
            xb = prepare(xb)
        logits = model(xb).float()
        # The plain cross-entropy, whatever the training objective's label smoothing.
        loss_sum += Objective().loss(logits, yb, "sum").double()
        correct += (logits.argmax(dim=1) == yb).sum()
        predictions.append(logits.argmax(dim=1))
    model.train(was_training)
    n = max(len(y), 1)
    if metric == "mcc":
        from sklearn.metrics import matthews_corrcoef

        pred = torch.cat(predictions).cpu().numpy() if predictions else np.zeros(0)
        return 100.0 * float(matthews_corrcoef(y.cpu().numpy(), pred)), loss_sum.item() / n
    return 100.0 * correct.item() / n, loss_sum.item() / n
