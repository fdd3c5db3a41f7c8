"""The client step, written once: the objective, the model's split into what a functional call
takes, and gradient clipping. Every executor (the sequential loop, the compiled whole step, the
vectorised and seeds-together stacked steps), the private mechanisms, evaluation and the
benchmarks call these; none writes its own loss, clip or split."""

from fedbench.step.clipping import clip_by_norm_
from fedbench.step.functional import ModelSplit, split_model
from fedbench.step.objective import Objective

__all__ = ["ModelSplit", "Objective", "clip_by_norm_", "split_model"]
