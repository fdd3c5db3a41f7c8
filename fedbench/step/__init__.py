"""The client step, written once: the objective, the model's split into what a functional call
takes, gradient clipping and the forward's autocast. Every executor (the sequential loop, the
compiled whole step, the vectorised and seeds-together stacked steps), the private mechanisms,
evaluation and the benchmarks call these; none writes its own loss, clip, split or autocast."""

from fedbench.step.clipping import clip_by_norm_
from fedbench.step.functional import ModelSplit, split_model
from fedbench.step.objective import Objective
from fedbench.step.precision import autocast_context

__all__ = ["ModelSplit", "Objective", "autocast_context", "clip_by_norm_", "split_model"]
