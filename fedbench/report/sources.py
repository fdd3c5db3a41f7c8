"""Table folders read for a figure or a merged report: each folder's plan, table, per-cell
summary and resolved run configs (`Source`); whether several folders share a setting (every
field the runs of one folder share is the same in the others, what the rows and the privacy
budgets change left aside); and each row's label where two folders have a row of one name (the
settings that tell them apart, else the folder)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fedbench.errors import FedbenchError
from fedbench.report.collect import collect, plan_table, read_plan, run_configs, with_metrics
from fedbench.report.ran import IGNORED_PREFIXES, Cfg, describe, facts, flatten
from fedbench.report.runs import distinguishing, label
from fedbench.report.tables import summarise
from fedbench.runner.table_config import TableConfig

#: Fields that change with the row or with the privacy budget: never part of the setting two
#: folders must share (nor of a panel).
ROW_PREFIXES = ("algorithm.", "privacy", "seed")


@dataclass
class Source:
    """One table folder as the figure reads it: its plan, table, per-cell summary (the
    report's, with the figure's metric) and its runs' resolved configs by run id."""

    folder: Path
    plan: dict[str, Any]
    table: TableConfig
    summary: pd.DataFrame
    runs: pd.DataFrame
    configs: dict[str, Cfg]

    @classmethod
    def read(cls, folder: Path, metric: str, runs_root: Path | None = None) -> Source:
        """The folder's runs under RUNS_ROOT (default: its sibling runs/ folder)."""
        plan = read_plan(folder)
        table = with_metrics(plan_table(plan), [metric])
        runs_root = runs_root or folder.parent / "runs"
        runs, _ = collect(folder, runs_root, table)
        summary = summarise(runs, table, ci=True)
        configs = run_configs(plan, runs_root)
        return cls(folder, plan, table, summary, runs, configs)

    def row_configs(self, method: str) -> list[Cfg]:
        runs = self.plan["runs"]
        return [
            self.configs[r["run_id"]]
            for r in runs
            if r["method"] == method and r["run_id"] in self.configs
        ]

    def constant(self) -> dict[str, Any]:
        """The fields every run of this folder shares (row and privacy fields left aside)."""
        flat = [flatten(c) for c in self.configs.values()]
        if not flat:
            return {}
        keys = set.intersection(*(set(f) for f in flat))
        out = {}
        for key in sorted(keys):
            if key.startswith(IGNORED_PREFIXES) or key.startswith(ROW_PREFIXES):
                continue
            values = {json.dumps(f[key], sort_keys=True) for f in flat}
            if len(values) == 1:
                out[key] = flat[0][key]
        return out

    def what_ran(self) -> str:
        by_column: dict[str, list[Cfg]] = {}
        for run in self.plan["runs"]:
            if run["run_id"] in self.configs:
                by_column.setdefault(json.dumps(run["setting"]), []).append(
                    self.configs[run["run_id"]]
                )
        text = describe(facts(by_column)) if by_column else "nothing has run yet"
        overrides = self.plan.get("overrides") or []
        preset = self.plan.get("preset")
        extra = [f"preset {preset}"] if preset else []
        extra += [f"--set {', '.join(overrides)}"] if overrides else []
        return text + (f" ({'; '.join(extra)})" if extra else "")


def check_shared_setting(sources: list[Source]) -> None:
    """Folders plotted together must share their setting (ROW_PREFIXES aside): a one-line
    error names the first field that differs."""
    first = sources[0].constant()
    for other in sources[1:]:
        theirs = other.constant()
        for key in first:
            if key in theirs and json.dumps(first[key]) != json.dumps(theirs[key]):
                raise FedbenchError(
                    f"{sources[0].folder} and {other.folder} do not share a setting: {key} is "
                    f"{first[key]!r} in one and {theirs[key]!r} in the other; plot them apart"
                )


def row_labels(sources: list[Source]) -> dict[tuple[int, str], str]:
    """(source index, row) -> its label, for every planned row: the row's name, and where two
    folders have a row of that name, the settings that tell them apart ('DP-FedAvg,
    lr=0.05'), else the folder."""
    names: dict[str, list[tuple[int, str]]] = {}
    for i, source in enumerate(sources):
        for method in dict.fromkeys(run["method"] for run in source.plan["runs"]):
            names.setdefault(method, []).append((i, method))
    out: dict[tuple[int, str], str] = {}
    for name, rows in names.items():
        if len(rows) == 1:
            out[rows[0]] = name
            continue
        cfgs = [(sources[i].row_configs(m) or [{}])[0] for i, m in rows]
        keys = [k for k in distinguishing(cfgs) if not k.startswith(("privacy", "seed"))]
        for (i, m), cfg in zip(rows, cfgs, strict=True):
            told = label(flatten(cfg), keys) if keys else ""
            out[(i, m)] = f"{name}, {told}" if told else f"{name} ({sources[i].folder})"
    return out
