"""The base of every config model (run config sections, algorithm hyperparameters, table
configs): kept apart from fedbench.config so that algorithms/ can define its hyperparameter
models without importing the run config that composes them."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

#: A random seed: numpy's and torch's generators take any integer in [0, 2**64).
Seed = Annotated[int, Field(ge=0, lt=2**64)]


class Strict(BaseModel):
    """Unknown keys are errors (a typo is never a silently ignored setting) and instances are
    frozen: a resolved config is a value, changed only by building a new one (model_copy).

    Every float field of every config model is finite (`allow_inf_nan=False`): inf or nan in a
    learning rate, a weight decay, an alpha, ... is a config error naming the field, not a run
    that diverges at its first round.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
