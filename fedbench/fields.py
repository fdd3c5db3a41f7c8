"""The settings of a config model as a user reads them: name, type, default, range, meaning.

Read from the pydantic models themselves (annotations, defaults, `Field(gt=..., description=...)`),
so `fedbench list algorithms NAME` can never disagree with what the config accepts.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo


@dataclass(frozen=True)
class FieldRow:
    name: str
    type: str
    default: str
    range: str
    meaning: str


def type_label(annotation: Any) -> str:
    """`float`, `float or null`, `tensor | hessian | global` (a Literal's choices), ..."""
    origin = get_origin(annotation)
    if origin is Literal:
        return " | ".join(str(a) for a in get_args(annotation))
    if origin in (Union, types.UnionType):
        args = get_args(annotation)
        named = [type_label(a) for a in args if a is not type(None)]
        return " or ".join(named) + (" or null" if type(None) in args else "")
    if origin is not None:  # dict[str, Any], list[int]
        return str(annotation).replace("typing.", "")
    return getattr(annotation, "__name__", str(annotation))


def range_label(field: FieldInfo) -> str:
    """The numeric bounds of a field as an interval: `> 0`, `[0, 1)`, or empty."""
    low = high = ""
    for item in field.metadata:
        if isinstance(item, annotated_types.Gt):
            low = f"({item.gt}"
        elif isinstance(item, annotated_types.Ge):
            low = f"[{item.ge}"
        elif isinstance(item, annotated_types.Lt):
            high = f"{item.lt})"
        elif isinstance(item, annotated_types.Le):
            high = f"{item.le}]"
    if low and high:
        return f"{low}, {high}"
    if low:
        return (">= " if low[0] == "[" else "> ") + low[1:]
    if high:
        return ("<= " if high[-1] == "]" else "< ") + high[:-1]
    return ""


def default_label(field: FieldInfo) -> str:
    """The default as YAML writes it: null, true/false, numbers, names."""
    factory = field.default_factory
    if factory is not None:
        is_section = isinstance(factory, type) and issubclass(factory, BaseModel)
        return "(a section)" if is_section else repr(field.get_default(call_default_factory=True))
    if isinstance(field.default, bool) or field.default is None:
        return {None: "null", True: "true", False: "false"}[field.default]
    return str(field.default)


def meaning(model: type[BaseModel], name: str) -> str:
    """The field's description, else that of the nearest ancestor model declaring the same field
    (a subclass that only changes a default, e.g. FedAvg's lr, keeps the field's meaning)."""
    for cls in model.__mro__:
        fields = getattr(cls, "model_fields", None)
        if isinstance(fields, dict) and name in fields and fields[name].description:
            return fields[name].description
    return ""


def field_rows(model: type[BaseModel], skip: tuple[str, ...] = ()) -> list[FieldRow]:
    """One row per field of `model`, in declaration order."""
    return [
        FieldRow(
            name,
            type_label(field.annotation),
            default_label(field),
            range_label(field),
            meaning(model, name),
        )
        for name, field in model.model_fields.items()
        if name not in skip
    ]
