""" "Did you mean ...?" for every name a user types: algorithms, datasets, models, config fields,
tables, presets, rows. One helper so that every unknown-name error reads the same way."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, get_args

from pydantic import BaseModel


def closest(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The candidates closest to `name` (case-insensitive: `FedAdamw` finds `fedadamw`)."""
    by_lower: dict[str, str] = {}
    for candidate in candidates:
        by_lower.setdefault(candidate.lower(), candidate)
    if name.lower() in by_lower:  # a case slip: the one exact match, nothing fuzzier
        return [by_lower[name.lower()]]
    matches = difflib.get_close_matches(name.lower(), list(by_lower), n=n, cutoff=0.6)
    return [by_lower[m] for m in matches]


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """` did you mean 'x'?` (or 'x' or 'y'), or an empty string when nothing is close."""
    matches = closest(name, candidates)
    if not matches:
        return ""
    return " did you mean " + " or ".join(repr(m) for m in matches) + "?"


#: Beyond this many known names an error lists only the closest and where to see them all:
#: the 43 algorithms made one line of ~600 characters.
MAX_LISTED = 12
#: The `fedbench list` argument that shows every name of a registry kind.
LIST_COMMANDS = {
    "algorithm": "algorithms",
    "dataset": "datasets",
    "model": "models",
    "partition kind": "partitions",
    "figure": "figures",
}


def unknown(kind: str, name: str, known: Iterable[str]) -> str:
    """`unknown KIND 'name'; did you mean 'x'? known: a, b, c` (one line). A long list gives
    only the closest names and the command that lists them all (`fedbench list algorithms`)."""
    known = sorted(known)
    hint = did_you_mean(name, known)
    if len(known) > MAX_LISTED and kind in LIST_COMMANDS:
        return (
            f"unknown {kind} {name!r};{hint} see all {len(known)}: fedbench list "
            + (LIST_COMMANDS[kind])
        )
    return f"unknown {kind} {name!r};{hint} known: {', '.join(known) or 'none'}"


def model_at(model: type[BaseModel], path: Sequence[str | int]) -> type[BaseModel] | None:
    """The pydantic model that holds the field at `path` inside `model` (None if not a model)."""
    for part in path:
        field = model.model_fields.get(str(part))
        if field is None:
            return None
        nested = _model_in(field.annotation)
        if nested is None:
            return None
        model = nested
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The BaseModel class inside an annotation such as `X | None` or `SerializeAsAny[X]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def unknown_field(model: type[BaseModel], loc: Sequence[str | int], prefix: str = "") -> str:
    """One line for an unknown key at `loc` of `model`: the closest known keys of its section."""
    dotted = ".".join(str(p) for p in (*([prefix] if prefix else []), *loc))
    section = model_at(model, loc[:-1])
    if section is None:
        return f"unknown config field {dotted!r}; check its spelling against the config reference"
    fields = list(section.model_fields)
    hint = did_you_mean(str(loc[-1]), fields)
    return f"unknown config field {dotted!r};{hint} known here: {', '.join(fields)}"


def unknown_algorithm_field(
    key: str, name: str, fields_of: Mapping[str, Iterable[str]], previous: str | None = None
) -> str:
    """One line for `algorithm.KEY` unknown to algorithm NAME (`fields_of`: every algorithm's
    field names): the closest fields of NAME, or, when KEY belongs to another algorithm (e.g.
    the one before `--set algorithm.name=NAME`), say so and list NAME's fields."""
    fields = [f for f in fields_of[name] if f != "name"]
    listed = f"{name}'s fields: {', '.join(fields)}"
    if previous is not None and previous != name and key in fields_of.get(previous, ()):
        return (
            f"unknown config field 'algorithm.{key}' for {name}: it belongs to the previous "
            f"algorithm {previous}; remove it from the config. {listed}"
        )
    owners = sorted(a for a, known in fields_of.items() if key in known)
    if owners:
        return (
            f"unknown config field 'algorithm.{key}' for {name}: it is a field of "
            f"{', '.join(owners[:4])}{', ...' if len(owners) > 4 else ''}; {listed}"
        )
    hint = did_you_mean(key, fields)
    return f"unknown config field 'algorithm.{key}' for {name};{hint} {listed}"
