"""The local objective: the one place where fedbench computes a loss from logits.

f_i(y; xi) = CE(h(y; x), t), the cross-entropy of the model's logits against the labels, with
optional label smoothing (`fl.label_smoothing`, Szegedy et al., 2016: the target is
(1 - s) * onehot(t) + s / C). Reductions: the mean over the batch (a local step), the sum
(evaluation, Mime's full-batch gradient), one value per sample (per-sample clipping), or a
masked mean (the vectorised engine's padded batches). Private mechanisms upcast half-precision
logits to float32 first, so that per-sample norms are not computed from bf16 losses.

Evaluation reports the plain cross-entropy (`Objective()`), whatever the training objective,
so test losses stay comparable across runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn
from torch.func import functional_call

from fedbench.step.functional import ModelSplit
from fedbench.step.precision import autocast_context

Reduction = Literal["mean", "sum", "none"]


def full_precision(logits: Tensor) -> Tensor:
    """Logits for a private loss: float32 when autocast produced half precision, else as they
    are."""
    return logits.float() if logits.dtype in (torch.bfloat16, torch.float16) else logits


@dataclass(frozen=True)
class Objective:
    """The training loss of a run (module docstring)."""

    #: s in [0, 1): the weight of the uniform distribution in the smoothed target.
    label_smoothing: float = 0.0

    def loss(self, logits: Tensor, y: Tensor, reduction: Reduction = "mean") -> Tensor:
        """CE(logits, y) with the run's label smoothing, reduced as asked."""
        return nn.functional.cross_entropy(
            logits, y, reduction=reduction, label_smoothing=self.label_smoothing
        )

    def private_loss(self, logits: Tensor, y: Tensor, reduction: Reduction = "mean") -> Tensor:
        """The loss of a private mechanism: logits upcast from half precision first."""
        return self.loss(full_precision(logits), y, reduction)

    def masked_mean(self, logits: Tensor, y: Tensor, weights: Tensor | None) -> Tensor:
        """The mean loss over the samples whose weight is 1 (a padded batch), or the plain mean
        when there is no mask."""
        if weights is None:
            return self.loss(logits, y)
        return (self.loss(logits, y, "none") * weights).sum() / weights.sum()

    def functional(
        self,
        model: nn.Module,
        split: ModelSplit | None,
        params: Mapping[str, Tensor],
        buffers: Mapping[str, Tensor],
        x: Tensor,
        y: Tensor,
        weights: Tensor | None = None,
        *,
        autocast: torch.dtype | None = None,
        private: bool = False,
    ) -> Tensor:
        """The loss of `model` with `params` and `buffers` in place of its own (torch.func's
        functional call: what grad and vmap differentiate); the split's constants fill in the
        rest (None: `buffers` holds every other tensor). `autocast`: the forward alone runs
        under autocast to that dtype; `private`: the private mechanisms' loss."""
        constants = split.constants if split is not None else {}
        with autocast_context(x.device.type, autocast):
            logits = functional_call(model, (dict(params), dict(buffers), constants), (x,))
        if private:
            return self.private_loss(logits, y)
        return self.masked_mean(logits, y, weights)
