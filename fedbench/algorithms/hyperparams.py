"""The hyperparameters every algorithm shares: `AlgorithmConfig` and the learning-rate schedule.

The config type's own home: it imports neither the algorithm contract (base.py) nor the registry,
so base.py, the registry and the name -> model dispatch (params.py) all build on it without an
import circle, even one seen only by a type checker.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from fedbench.strict import Strict

#: The algorithm of a run config without an `algorithm.name`.
DEFAULT_ALGORITHM = "fedadamw"


class AlgorithmConfig(Strict):
    """Fields common to every algorithm; each algorithm subclasses it with its own fields."""

    name: str = Field(
        default=DEFAULT_ALGORITHM, description="the algorithm (fedbench list algorithms)"
    )
    lr: float = Field(
        default=3.0e-4, gt=0, description="local learning rate eta_0, where the schedule starts"
    )
    lr_schedule: Literal["constant", "cosine", "exp"] = Field(
        default="cosine", description="the local learning rate's schedule"
    )
    lr_schedule_scope: Literal["round", "local"] = Field(
        default="round",
        description="what the schedule runs over: the R rounds (eta_r, constant within a round) "
        "or the K local steps of every round (restarting at lr each round)",
    )
    lr_decay: float = Field(
        default=0.998, gt=0, description="per-round factor gamma of the exp schedule"
    )
    server_lr: float = Field(
        default=1.0, gt=0, description="server learning rate eta_g on the mean update"
    )
    weight_decay: float = Field(
        default=0.01, ge=0, description="weight decay lambda (coupled or decoupled: per algorithm)"
    )
    grad_clip: float | None = Field(
        default=10.0, gt=0, description="clip each raw local gradient to this L2 norm; null: off"
    )
    weighting: Literal["uniform", "samples"] = Field(
        default="uniform", description="client weights in the server mean: equal, or n_i"
    )


def schedule_factor(kind: str, decay: float, t: int, horizon: int) -> float:
    """The schedule's multiple of `lr` at position t of `horizon` (t = 0..horizon-1): cosine
    0.5 * (1 + cos(pi t / horizon)), exp decay^t, constant 1. Over the rounds (t = r, horizon R)
    or, with `lr_schedule_scope: local`, over the local steps (t = k - 1, horizon K)."""
    if kind == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * t / horizon))
    if kind == "exp":
        return decay**t
    return 1.0
