"""The base of every config model (run config sections, algorithm hyperparameters, table
configs): kept apart from fedbench.config so that algorithms/ can define its hyperparameter
models without importing the run config that composes them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """Unknown keys are errors (a typo is never a silently ignored setting) and instances are
    frozen: a resolved config is a value, changed only by building a new one (model_copy)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
