"""Table configs (docs/tables.md, "Table config reference") and their expansion into a plan of run configs.

A table is rows (`methods`: label -> nested overrides) x columns (the cartesian product of `grid`:
dotted key -> values) x `seeds`. The run config of one cell is built in this order, each step
overriding the previous ones (the precedence is public and tested):

    base  <  method overrides  <  grid value (and the seed)  <  column overrides  <  preset
    <  preset's row overrides  <  --set

`column_overrides: {grid key: {grid value: {dotted key: value}}}` sets other fields for the
columns that hold a given grid value, e.g. the DP-FedAdamW paper's delta 1e-6 for Tiny-ImageNet
(`{data.name: {tinyimagenet: {privacy.delta: 1.0e-6}}}`) while the other datasets keep the base's.

A preset may hold `methods: {row label: {dotted key: value}}`: overrides for one row only, e.g.
a learning rate suited to the quick preset's small data for the Adam-family rows, and
`column_overrides` of its own (applied after the preset's plain keys), e.g. a stand-in dataset
and its target accuracy per column.

A preset value for a key that is also a grid key may be a mapping {grid value: replacement}: the
column keeps its identity (and its paper numbers) while the run uses the replacement, e.g. the
`quick` preset of Table 1 trains `cnn` in the resnet18 column and `logreg` in the vit_tiny column.

A --set on a grid key replaces that key's columns by its value (a YAML list: several columns);
the cells of those columns take the value last, as every --set.
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from fedbench.config import (
    AlgorithmConfig,
    RunConfig,
    Strict,
    format_validation_error,
    parse_override,
    parse_run_config,
    read_yaml,
    set_path,
)
from fedbench.errors import FedbenchError
from fedbench.labels import unprintable
from fedbench.personal.summary import PERSONAL_METRICS
from fedbench.runner.space import row_space
from fedbench.suggest import did_you_mean

#: Metrics a table can report. comm = comm_up / d per client-round (the paper's "Comm" column).
#: best_test_acc = the best evaluated test_acc of a run; rounds_to_target = its first evaluated
#: round with test_acc >= eval.target (runs that never reach it are counted, never averaged).
#: epsilon = the privacy a private run spent (summary.json; reports add it to tables with DP rows).
#: personal_acc_mean, ... = the personalised protocol's columns at the last round.
METRICS = (
    "test_acc",
    "train_loss",
    "test_loss",
    "comm",
    "comm_up",
    "comm_down",
    "wall_s",
    "best_test_acc",
    "rounds_to_target",
    "client_drift",
    "relative_drift",
    "v_spread",
    "local_step_ratio",
    "epsilon",
    # the personalised protocol's summaries across clients (fedbench.personal.summary)
    *PERSONAL_METRICS,
)
#: The `eval.diagnostics` measurements (FedAdamW Figure 2's client drift and v spread, and the
#: local step's RMS size over the learning rate): a run's value is their mean over the evaluated
#: rounds that measured them. They explain results rather than rank methods: no best, no ties.
DIAGNOSTIC_METRICS = ("client_drift", "relative_drift", "v_spread", "local_step_ratio")
#: Metrics that do not depend on the column: reported once per row.
ROW_METRICS = ("comm",)


class PaperRef(Strict):
    """Where a table's reference numbers live (fedbench/paper_tables/<table>.csv) and how our
    rows, columns and metrics map onto the paper's labels. Unmapped names are used as they are;
    common grid keys have default mappings (fedbench.report.paper.DEFAULT_COLUMNS)."""

    table: str
    rows: dict[str, str] = Field(default_factory=dict, description="our row label -> paper's")
    columns: dict[str, str] = Field(default_factory=dict, description="dotted key -> setting key")
    values: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="dotted key -> {our value: paper's label}"
    )
    metrics: dict[str, str] = Field(default_factory=dict, description="our metric -> paper's")
    where: dict[str, str] = Field(
        default_factory=dict,
        description="paper setting key -> label fixed for the whole table (e.g. model: ResNet-18 "
        "when the paper table mixes models that our config keeps in `base`)",
    )


class TableConfig(Strict):
    table: str
    title: str = ""
    #: Printed under the table in every report (e.g. why our numbers differ from the paper's).
    note: str = ""
    paper: PaperRef | None = None
    base: dict[str, Any] = Field(default_factory=dict)
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    #: grid key -> {grid value: {dotted key: value}}: per-column settings (module docstring).
    column_overrides: dict[str, dict[Any, dict[str, Any]]] = Field(default_factory=dict)
    #: grid key -> {grid value: the column's name in the report}, in place of the name built
    #: from what ran (the report then lists what each named column ran).
    column_labels: dict[str, dict[Any, str]] = Field(default_factory=dict)
    methods: dict[str, dict[str, Any]]
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2, 3, 4], min_length=1)
    metrics: list[str] = Field(default_factory=lambda: ["test_acc", "train_loss"])
    presets: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: Row label -> {dotted key: [values] (a grid) | "log:LOW:HIGH"}: the space `fedbench tune
    #: TABLE` searches for that row when no --space/--grid is given (docs/tuning.md).
    tuning: dict[str, dict[str, Any]] = Field(default_factory=dict)
    report: Literal["final", "best", "last_k_mean"] = "final"
    last_k: int = Field(default=3, ge=1)

    @field_validator("paper", mode="before")
    @classmethod
    def _paper_key(cls, value: Any) -> Any:
        return {"table": value} if isinstance(value, str) else value

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: list[str]) -> list[str]:
        unknown = [m for m in value if m not in METRICS]
        if unknown:
            raise ValueError(f"unknown metric {unknown[0]!r}; known: {', '.join(METRICS)}")
        return value

    @model_validator(mode="after")
    def _non_empty(self) -> TableConfig:
        if not self.methods:
            raise ValueError("methods must name at least one row")
        for key, values in self.grid.items():
            if not values:
                raise ValueError(f"grid key {key!r} has no values")
        for field_name in ("column_overrides", "column_labels"):
            for key, by_value in getattr(self, field_name).items():
                if key not in self.grid:
                    raise ValueError(
                        f"{field_name} key {key!r} is not a grid key; grid keys: "
                        f"{', '.join(self.grid) or 'none'}"
                    )
                unknown = [v for v in by_value if v not in self.grid[key]]
                if unknown:
                    raise ValueError(
                        f"{field_name}.{key}: {unknown[0]!r} is not one of the grid's values "
                        f"{self.grid[key]}"
                    )
        for row, spec in self.tuning.items():
            if row not in self.methods:
                raise ValueError(
                    f"tuning: {row!r} is not a row;{did_you_mean(row, self.methods)} rows: "
                    f"{', '.join(self.methods)}"
                )
            row_space(row, spec)
        return self

    def column_items(self, setting: dict[str, Any]) -> list[tuple[str, Any]]:
        """The dotted-key overrides of one column (`column_overrides`), in the order written."""
        items: list[tuple[str, Any]] = []
        for key, by_value in self.column_overrides.items():
            items.extend((by_value.get(setting[key]) or {}).items())
        return items

    def named_column(self, setting: dict[str, Any]) -> str | None:
        """The column's name from `column_labels` (its grid keys' names joined by ' / ', a key
        without one named 'key=value'); None when the table names none of its values."""
        named = [self.column_labels.get(k, {}).get(v) for k, v in setting.items()]
        if not any(named):
            return None
        return " / ".join(n or f"{k}={v}" for n, (k, v) in zip(named, setting.items(), strict=True))

    def settings(self) -> list[dict[str, Any]]:
        """The columns: every combination of grid values, in the order written."""
        keys = list(self.grid)
        return [
            dict(zip(keys, combo, strict=True)) for combo in itertools.product(*self.grid.values())
        ]


@dataclass
class PlannedRun:
    method: str
    setting: dict[str, Any]
    seed: int
    cfg: RunConfig
    run_id: str = field(init=False)

    def __post_init__(self) -> None:
        self.run_id = self.cfg.run_id()

    def client_steps(self) -> int:
        from fedbench.engine.schedule import clients_per_round

        fl = self.cfg.fl
        # Clients known before the partition is built: the config's count (natural splits differ).
        return (
            fl.rounds
            * clients_per_round(fl.participation, self.cfg.partition.clients)
            * (fl.local_steps)
        )


def column_key(setting: dict[str, Any]) -> str:
    """A column's name as tuned.yaml and reports write it: `k=v, k=v` ("-" without a grid)."""
    return ", ".join(f"{k}={v}" for k, v in setting.items()) or "-"


#: Per-cell overrides chosen by `fedbench tune`: row label -> column key -> {dotted key: value}.
Tuned = dict[str, dict[str, dict[str, Any]]]


@dataclass
class Plan:
    table: TableConfig
    preset: str | None
    runs: list[PlannedRun]
    overrides: list[str]
    #: The overrides of `--tuned` (empty when the table's own hyperparameters run).
    tuned: Tuned = field(default_factory=dict)
    #: On which data the tuned values were chosen (`tune.tuned_split`), for the report.
    tuned_on: str = ""

    @property
    def name(self) -> str:
        """The table folder's name: <table>[-<preset>][-tuned]."""
        name = f"{self.table.table}-{self.preset}" if self.preset else self.table.table
        return f"{name}-tuned" if self.tuned else name

    def client_steps(self) -> int:
        return sum(run.client_steps() for run in self.runs)


# ---------------------------------------------------------------------------------------------
# Finding and loading table configs


def config_roots() -> list[Path]:
    """Where table names are looked up: ./configs, the source checkout's configs/, the package."""
    package = Path(__file__).resolve().parent.parent
    roots = [Path.cwd() / "configs", package.parent / "configs", package / "configs"]
    unique: list[Path] = []
    for root in roots:
        if root not in unique:
            unique.append(root)
    return unique


#: Sub-folders of a config root that hold tables, by kind: the FedAdamW tables at the top, the
#: DP-FedAdamW and FedAdamom papers' tables in their own folders.
TABLE_FOLDERS: dict[str, tuple[str, ...]] = {
    "table": ("", "dp", "fedadamom"),
    "ablation": ("ablations",),
}


def _table_folders(kind: Literal["table", "ablation"]) -> list[Path]:
    return [root / sub if sub else root for root in config_roots() for sub in TABLE_FOLDERS[kind]]


def find_table(name: str, kind: Literal["table", "ablation"] = "table") -> Path:
    """TABLE as a path, else <name>.yaml in configs/ (tables: also configs/dp/, configs/fedadamom/;
    ablations: configs/ablations/) of the current folder, the source checkout, then the package."""
    as_path = Path(name)
    if as_path.suffix in (".yaml", ".yml") or as_path.is_file():
        if as_path.is_file():
            return as_path
        raise FedbenchError(f"table config {name} not found")
    tried = []
    for folder in _table_folders(kind):
        candidate = folder / f"{name}.yaml"
        tried.append(str(folder))
        if candidate.is_file():
            return candidate
    other: Literal["table", "ablation"] = "ablation" if kind == "table" else "table"
    if name in list_tables(other):
        command = "ablate" if other == "ablation" else "run"
        article = {"table": "a table", "ablation": "an ablation"}
        raise FedbenchError(
            f"{name!r} is {article[other]}, not {article[kind]}; "
            f"run it with `fedbench {command} {name}`"
        )
    known = list_tables(kind)
    raise FedbenchError(
        f"no {kind} named {name!r};{did_you_mean(name, known)} known: {', '.join(known) or 'none'}"
        f" (looked in {', '.join(tried)})"
    )


def list_tables(kind: Literal["table", "ablation"] = "table") -> list[str]:
    names: set[str] = set()
    for folder in _table_folders(kind):
        if folder.is_dir():
            names.update(path.stem for path in folder.glob("*.yaml") if path.stem != "demo")
    return sorted(names)


def parse_table_config(data: dict[str, Any], source: str = "table config") -> TableConfig:
    if "table" not in data or "methods" not in data:
        raise FedbenchError(
            f"{source} is not a table config (it needs `table:` and `methods:`); "
            "train a single run config with `fedbench train`"
        )
    try:
        table = TableConfig.model_validate(data)
    except ValidationError as exc:
        raise FedbenchError(
            f"{source}: {format_validation_error(exc, model=TableConfig)}"
        ) from None
    problem = unprintable_label(table)
    if problem is not None:
        raise FedbenchError(f"{source}: {problem}")
    return table


def unprintable_label(table: TableConfig) -> str | None:
    """What in the table's name, title, note, row or column labels the reports (table.md, .csv,
    .tex) cannot hold as text (fedbench.labels), or None."""
    texts = [("table", table.table, False), ("title", table.title, False)]
    texts += [("note", table.note, True)]
    texts += [("row", label, False) for label in table.methods]
    texts += [
        (f"column_labels.{key}", label, False)
        for key, labels in table.column_labels.items()
        for label in labels.values()
    ]
    for where, text, lines in texts:
        problem = unprintable(text, lines=lines)
        if problem is not None:
            return f"{where} {text!r} holds {problem}, which a report cannot hold; write it without"
    return None


def load_table(name: str, kind: Literal["table", "ablation"] = "table") -> TableConfig:
    path = find_table(name, kind)
    return parse_table_config(read_yaml(path), str(path))


# ---------------------------------------------------------------------------------------------
# Plan expansion


def _deep_merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _deep_merge(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _merge_method(base: dict[str, Any], method: dict[str, Any]) -> dict[str, Any]:
    """Method overrides on the base. A row that switches algorithm keeps only the base's common
    algorithm fields (lr_schedule, grad_clip, ...): another algorithm's own fields would be errors."""
    base = copy.deepcopy(base)
    base_alg = base.get("algorithm") or {}
    method_alg = method.get("algorithm") or {}
    if "name" in method_alg and method_alg["name"] != base_alg.get("name"):
        common = set(AlgorithmConfig.model_fields)
        base["algorithm"] = {k: v for k, v in base_alg.items() if k in common and k != "name"}
    return _deep_merge(base, method)


#: The key of a preset that holds per-row overrides.
PRESET_METHODS = "methods"
PRESET_COLUMNS = "column_overrides"


def _preset_column_items(
    table: TableConfig, preset: str | None, setting: dict[str, Any]
) -> list[tuple[str, Any]]:
    """The preset's `column_overrides` for one column (same form as the table's)."""
    if preset is None:
        return []
    by_key = table.presets[preset].get(PRESET_COLUMNS) or {}
    if not isinstance(by_key, dict) or any(key not in setting for key in by_key):
        raise FedbenchError(
            f"{table.table} preset {preset!r}: `column_overrides` must map grid keys to "
            "{grid value: overrides}"
        )
    items: list[tuple[str, Any]] = []
    for key, by_value in by_key.items():
        items.extend(((by_value or {}).get(setting[key]) or {}).items())
    return items


def _preset_items(table: TableConfig, preset: str | None) -> list[tuple[str, Any]]:
    if preset is None:
        return []
    if preset not in table.presets:
        known = sorted(table.presets)
        raise FedbenchError(
            f"{table.table} has no preset {preset!r};{did_you_mean(preset, known)} "
            f"known: {', '.join(known) or 'none'}"
        )
    special = (PRESET_METHODS, PRESET_COLUMNS)
    return [(k, v) for k, v in table.presets[preset].items() if k not in special]


def _preset_row_items(table: TableConfig, preset: str | None, method: str) -> list[tuple[str, Any]]:
    """The preset's overrides for one row (`methods: {row: {dotted key: value}}`)."""
    if preset is None:
        return []
    rows = table.presets[preset].get(PRESET_METHODS) or {}
    if not isinstance(rows, dict) or any(row not in table.methods for row in rows):
        unknown = (
            [row for row in rows if row not in table.methods] if isinstance(rows, dict) else rows
        )
        raise FedbenchError(
            f"{table.table} preset {preset!r}: `methods` must map row labels to overrides; "
            f"unknown rows {unknown}"
        )
    return list((rows.get(method) or {}).items())


def _apply_preset(
    data: dict[str, Any], items: list[tuple[str, Any]], setting: dict[str, Any]
) -> None:
    for key, value in items:
        if key in setting and isinstance(value, dict):
            # {grid value: replacement}: values not listed keep the grid value.
            value = value.get(setting[key], setting[key])
        set_path(data, key.split("."), copy.deepcopy(value))


def select_seeds(table: TableConfig, count: int | list[int] | None) -> list[int]:
    """The first `count` seeds of the table (continued with the next integers when it asks for
    more than the table lists), or an explicit list of seeds."""
    seeds = list(table.seeds)
    if count is None:
        return seeds
    if isinstance(count, list):
        if len(set(count)) != len(count) or any(s < 0 for s in count):
            raise FedbenchError(f"--seeds {count} must list distinct non-negative integers")
        return list(count)
    if count < 1:
        raise FedbenchError("--seeds must be at least 1")
    while len(seeds) < count:
        seeds.append(max(seeds) + 1)
    return seeds[:count]


#: The most runs one plan may hold. Every run is a folder of its own and a line of the plan; a
#: plan of more is a slip (--seeds 100000000), not an experiment, and is refused before any run
#: config is built (so --dry-run answers at once).
MAX_RUNS = 100_000


def check_plan_size(table: TableConfig, methods: list[str], seeds: int | list[int] | None) -> None:
    """Refuse a plan of more than MAX_RUNS runs, counted without building it."""
    count = len(seeds) if isinstance(seeds, list) else seeds if seeds is not None else 0
    count = count or len(table.seeds)
    cells = len(methods) * math.prod(len(values) for values in table.grid.values())
    if cells * count > MAX_RUNS:
        raise FedbenchError(
            f"{table.table}: {cells} cells x {count:,} seeds is {cells * count:,} runs, more than "
            f"the {MAX_RUNS:,} a sweep may hold (each run is a run folder); ask for fewer "
            "seeds (--seeds), rows (--methods) or columns"
        )


def select_methods(table: TableConfig, methods: list[str] | None) -> list[str]:
    if not methods:
        return list(table.methods)
    unknown = [m for m in methods if m not in table.methods]
    if unknown:
        hint = did_you_mean(unknown[0], table.methods)
        raise FedbenchError(
            f"{table.table} has no row {unknown[0]!r};{hint} rows: {', '.join(table.methods)}"
        )
    return [m for m in table.methods if m in methods]


def _grid_from_overrides(table: TableConfig, overrides: list[str]) -> TableConfig:
    """A --set on a grid key replaces that key's columns: `--set partition.alpha=0.1` runs the
    0.1 column only, `--set partition.alpha=[0.1,0.3]` those two, so that the headers of the
    report name what ran (it used to run 0.1 under every column's label)."""
    grid = dict(table.grid)
    for item in overrides:
        path, value = parse_override(item)
        key = ".".join(path)
        if key in grid:
            values = value if isinstance(value, list) else [value]
            if not values:
                raise FedbenchError(
                    f"--set {item} gives no column of {table.table}'s grid {key!r}; give one "
                    "value or a YAML list of values"
                )
            grid[key] = values
    return table if grid == table.grid else table.model_copy(update={"grid": grid})


def _apply_cell_overrides(
    data: dict[str, Any], overrides: list[str], setting: dict[str, Any]
) -> dict[str, Any]:
    """--set, last: on a grid key it sets the cell's own column value (its grid now holds the
    --set values), so that it beats the preset like every --set."""
    result = copy.deepcopy(data)
    for item in overrides:
        path, value = parse_override(item)
        key = ".".join(path)
        set_path(result, path, copy.deepcopy(setting[key]) if key in setting else value)
    return result


def expand(
    table: TableConfig,
    *,
    preset: str | None = None,
    seeds: int | list[int] | None = None,
    methods: list[str] | None = None,
    overrides: list[str] | None = None,
    tuned: Tuned | None = None,
) -> Plan:
    """rows x columns x seeds -> validated run configs (an invalid cell is a one-line error).
    `tuned` (from `fedbench tune`) overrides single cells after the preset, before --set."""
    tuned = tuned or {}
    preset_items = _preset_items(table, preset)
    overrides = list(overrides or [])
    for item in overrides:
        parse_override(item)  # a malformed --set fails before any cell is built
    table = _grid_from_overrides(table, overrides)
    check_plan_size(table, select_methods(table, methods), seeds)
    runs: list[PlannedRun] = []
    for method in select_methods(table, methods):
        row_items = _preset_row_items(table, preset, method)
        merged = _merge_method(table.base, table.methods[method])
        for setting in table.settings():
            for seed in select_seeds(table, seeds):
                data = copy.deepcopy(merged)
                for key, value in setting.items():
                    set_path(data, key.split("."), copy.deepcopy(value))
                data["seed"] = seed
                for key, value in table.column_items(setting):
                    set_path(data, key.split("."), copy.deepcopy(value))
                _apply_preset(data, preset_items, setting)
                _apply_preset(data, _preset_column_items(table, preset, setting), setting)
                _apply_preset(data, row_items, setting)
                for key, value in tuned.get(method, {}).get(column_key(setting), {}).items():
                    set_path(data, key.split("."), copy.deepcopy(value))
                data = _apply_cell_overrides(data, overrides, setting)
                try:
                    cfg = parse_run_config(data)
                except FedbenchError as exc:
                    where = ", ".join(f"{k}={v}" for k, v in setting.items())
                    cell = f"row {method!r}" + (f" column {where}" if where else "")
                    raise FedbenchError(f"{table.table} {cell}: {exc}") from None
                runs.append(PlannedRun(method, dict(setting), seed, cfg))
    return Plan(table, preset, runs, overrides, tuned)
