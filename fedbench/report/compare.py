"""`fedbench compare`: is one row better than another beyond seed noise?

Each side is a row of a table folder, `FOLDER:ROW` (ROW: the row's label or a unique prefix of
it, e.g. `A1` for "A1: w/o v_bar"), so that rows of one report, or the same row in two reports
(the paper's learning rate and a tuned one), can be set against each other. In every column the
two folders share, the per-seed values of the metric (as the report computes them) are compared
with the reports' test (Welch's t-test, two-sided, at level 0.05, with at least 3 seeds a side).
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

from fedbench.errors import FedbenchError
from fedbench.report.collect import collect, plan_table, read_plan, with_metrics
from fedbench.report.significance import LEVEL, MIN_SEEDS, welch_p
from fedbench.suggest import did_you_mean


@dataclass(frozen=True)
class Side:
    """One row of one table folder: its per-seed values by column (setting JSON)."""

    spec: str
    folder: Path
    row: str
    values: dict[str, list[float]]

    @property
    def label(self) -> str:
        """`table1-quick:FedAvg`: the folder's name and the row's full label."""
        return f"{self.folder.name}:{self.row}"


@dataclass(frozen=True)
class Comparison:
    a: Side
    b: Side
    column: dict[str, object]
    a_values: list[float]
    b_values: list[float]
    p: float

    @property
    def tested(self) -> bool:
        return min(len(self.a_values), len(self.b_values)) >= MIN_SEEDS and not math.isnan(self.p)

    @property
    def verdict(self) -> str:
        """'A > B', 'A < B' (beyond noise), 'tie' or 'not tested (n < 3)'."""
        if not self.tested:
            return f"not tested (fewer than {MIN_SEEDS} seeds)"
        if self.p >= LEVEL:
            return "tie"
        return ">" if _mean(self.a_values) > _mean(self.b_values) else "<"


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _match_row(spec: str, row: str, rows: list[str]) -> str:
    if row in rows:
        return row
    prefixed = [r for r in rows if r.lower().startswith(row.lower())]
    if len(prefixed) == 1:
        return prefixed[0]
    if len(prefixed) > 1:
        raise FedbenchError(
            f"{spec}: {row!r} matches several rows ({'; '.join(prefixed)}); give more of the label"
        )
    raise FedbenchError(f"{spec}: no row {row!r}{did_you_mean(row, rows)}; rows: {'; '.join(rows)}")


def read_side(spec: str, metric: str) -> Side:
    """`FOLDER:ROW` -> the row's completed per-seed values of `metric`, by column."""
    folder_text, sep, row = spec.partition(":")
    if not sep or not row.strip() or not folder_text:
        raise FedbenchError(
            f"{spec!r}: give a side as FOLDER:ROW, e.g. results/table1-quick:FedAvg"
        )
    folder = Path(folder_text)
    table = plan_table(read_plan(folder))
    row = _match_row(spec, row.strip(), list(table.methods))
    table = with_metrics(table, [metric])
    runs, _ = collect(folder, table=table)
    values: dict[str, list[float]] = {}
    mine = runs[(runs["method"] == row) & (runs["status"] == "completed")]
    for setting, value in zip(mine["setting"], mine[metric], strict=True):
        values.setdefault(setting, [])
        if value is not None and not math.isnan(value):
            values[setting].append(float(value))
    return Side(spec, folder, row, values)


def compare(specs: list[str], metric: str = "test_acc") -> list[Comparison]:
    """Every pair of sides, in every column both have values in."""
    if len(specs) < 2:
        raise FedbenchError("give at least two sides to compare, each FOLDER:ROW")
    sides = [read_side(spec, metric) for spec in specs]
    found = []
    for a, b in itertools.combinations(sides, 2):
        shared = [s for s in a.values if s in b.values]
        if not shared:
            raise FedbenchError(
                f"{a.spec} and {b.spec} share no column: their runs' grid values differ"
            )
        for setting in shared:
            p = welch_p(a.values[setting], b.values[setting])
            found.append(
                Comparison(a, b, json.loads(setting), a.values[setting], b.values[setting], p)
            )
    return found
