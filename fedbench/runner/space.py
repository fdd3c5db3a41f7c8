"""Search spaces of `fedbench tune`: `--space KEY=log:LOW:HIGH`, `--grid KEY=V1,V2,...`, and a
table config's own `tuning:` spaces (row label -> {dotted key: [values] | "log:LOW:HIGH"}), which
let `fedbench tune TABLE` search each row over the grid its paper tuned it on."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import yaml

from fedbench.errors import FedbenchError
from fedbench.yaml_safe import load_yaml

SPACE_HELP = "KEY=log:LOW:HIGH | uniform:LOW:HIGH | int:LOW:HIGH"


def optuna_module() -> Any:
    """Optuna, or a one-line error saying how to install it."""
    try:
        import optuna
    except ImportError:
        raise FedbenchError(
            "fedbench tune needs Optuna; install it with `pip install 'fedbench[tune]'`"
        ) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


@dataclass(frozen=True)
class SearchField:
    """One searched config field: a dotted key and its Optuna distribution."""

    key: str
    kind: str  # log | uniform | int | grid
    values: tuple[Any, ...]

    def distribution(self) -> Any:
        dist = optuna_module().distributions
        if self.kind == "grid":
            return dist.CategoricalDistribution(self.values)
        low, high = self.values
        if self.kind == "int":
            return dist.IntDistribution(int(low), int(high))
        return dist.FloatDistribution(float(low), float(high), log=self.kind == "log")


def _split(item: str, flag: str, form: str) -> tuple[str, str]:
    key, sep, spec = item.partition("=")
    if not sep or not key.strip() or not spec.strip():
        raise FedbenchError(f"{flag} {item!r} is not of the form {form}")
    return key.strip(), spec.strip()


def parse_space(item: str) -> SearchField:
    """`algorithm.lr=log:1e-4:1e-1` -> a log-uniform float field (also uniform:, int:)."""
    key, spec = _split(item, "--space", SPACE_HELP)
    parts = spec.split(":")
    if len(parts) != 3 or parts[0] not in ("log", "uniform", "int"):
        raise FedbenchError(f"--space {item!r} is not of the form {SPACE_HELP}")
    try:
        low, high = (float(p) for p in parts[1:])
    except ValueError:
        raise FedbenchError(f"--space {item!r}: LOW and HIGH must be numbers") from None
    if not (math.isfinite(low) and math.isfinite(high)):
        raise FedbenchError(f"--space {item!r}: LOW and HIGH must be finite numbers")
    if not low < high or (parts[0] == "log" and low <= 0):
        raise FedbenchError(f"--space {item!r}: need LOW < HIGH (and LOW > 0 for log)")
    return SearchField(key, parts[0], (low, high))


def parse_grid(item: str) -> SearchField:
    """`algorithm.lr=1e-4,3e-4,1e-3` -> a grid field (values parsed as YAML)."""
    key, spec = _split(item, "--grid", "KEY=V1,V2,...")
    try:
        values = tuple(load_yaml(v) for v in spec.split(",") if v.strip())
    except yaml.YAMLError:
        raise FedbenchError(
            f"--grid {item!r}: a value is not valid YAML; list plain values, e.g. "
            "--grid algorithm.lr=1e-4,3e-4 (a list value needs no brackets)"
        ) from None
    if not values:
        raise FedbenchError(f"--grid {item!r} lists no values")
    return SearchField(key, "grid", values)


def row_space(row: str, spec: dict[str, Any]) -> list[SearchField]:
    """One row's `tuning:` entry as search fields: a list is a grid, a string a --space range.
    Raises ValueError (a table config validation error) when an entry is malformed."""
    if not isinstance(spec, dict) or not spec:
        raise ValueError(f"tuning.{row} must map dotted keys to [values] or 'log:LOW:HIGH'")
    fields = []
    for key, value in spec.items():
        if isinstance(value, list):
            if not value:
                raise ValueError(f"tuning.{row}.{key} lists no values")
            fields.append(SearchField(str(key), "grid", tuple(value)))
        elif isinstance(value, str):
            try:
                fields.append(parse_space(f"{key}={value}"))
            except FedbenchError as exc:
                raise ValueError(f"tuning.{row}.{key}: {exc}") from None
        else:
            raise ValueError(
                f"tuning.{row}.{key} must be a list of values or 'log:LOW:HIGH', got {value!r}"
            )
    return fields
