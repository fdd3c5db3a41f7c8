"""The base of every config model (run config sections, algorithm hyperparameters, table
configs): kept apart from fedbench.config so that algorithms/ can define its hyperparameter
models without importing the run config that composes them."""

from __future__ import annotations

import types
from functools import cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

#: A random seed: numpy's and torch's generators take any integer in [0, 2**64).
Seed = Annotated[int, Field(ge=0, lt=2**64)]


class Strict(BaseModel):
    """Unknown keys are errors (a typo is never a silently ignored setting) and instances are
    frozen: a resolved config is a value, changed only by building a new one (model_copy).

    Every float field of every config model is finite (`allow_inf_nan=False`): inf or nan in a
    learning rate, a weight decay, an alpha, ... is a config error naming the field, not a run
    that diverges at its first round.

    No number field takes a boolean: pydantic reads `true` as 1 for an int (and 1.0 for a float),
    so `runtime.seeds_together: true` ran one seed at a time without a word. A field that admits
    `bool` itself keeps it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        found = None if field is None else _bool_for_a_number(field.annotation, value)
        if found is not None:
            raise ValueError(f"{str(found).lower()} is a boolean; give a number")
        return value


def _bool_for_a_number(annotation: Any, value: Any) -> bool | None:
    """The first bool that `value` holds where `annotation` wants a number (at the top, or as an
    item of a list, tuple or set, or a value of a mapping); None when there is none."""
    if isinstance(value, bool):
        return value if _numbers_only(annotation) else None
    if isinstance(value, list | tuple | set | frozenset | dict):
        items = value.values() if isinstance(value, dict) else value
        for inner in _item_annotations(annotation, dict if isinstance(value, dict) else list):
            for item in items:
                found = _bool_for_a_number(inner, item)
                if found is not None:
                    return found
    return None


@cache
def _numbers_only(annotation: Any) -> bool:
    """Whether `annotation` admits int or float and not bool (Annotated, Optional, unions)."""
    kinds = _scalars(annotation)
    return bool(kinds & {int, float}) and not kinds & {bool, Any, object}


def _scalars(annotation: Any) -> set[Any]:
    origin = get_origin(annotation)
    if origin is Annotated:
        return _scalars(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return set().union(*(_scalars(a) for a in get_args(annotation)))
    if origin is Literal:
        return {type(a) for a in get_args(annotation)}
    return {annotation}


def _item_annotations(annotation: Any, container: type) -> list[Any]:
    """The annotations of the items of a `container` value under `annotation`."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _item_annotations(get_args(annotation)[0], container)
    if origin in (Union, types.UnionType):
        return [i for a in get_args(annotation) for i in _item_annotations(a, container)]
    args = [a for a in get_args(annotation) if a is not Ellipsis]
    if container is dict and origin is dict and len(args) == 2:
        return [args[1]]
    if container is list and origin in (list, tuple, set, frozenset) and args:
        return args
    return []
