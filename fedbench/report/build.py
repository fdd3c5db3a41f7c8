"""Rebuild a table folder's report from its plan and its runs' folders."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Group

from fedbench.files import remove_stale_temporaries, write_file
from fedbench.report.collect import (
    MISSING,
    NOT_RUN,
    collect,
    paper_configs,
    plan_table,
    read_plan,
    run_configs,
    with_metrics,
)
from fedbench.report.plots import plot_curves
from fedbench.report.privacy_cells import legend_lines, method_labels, privacy_note
from fedbench.report.privacy_plot import write_figure
from fedbench.report.privacy_utility import has_budgets
from fedbench.report.ran import (
    KIND_FACTS,
    Cfg,
    column_label,
    dataset_label,
    describe,
    differences,
    differing_keys,
    facts,
    get_path,
    reads,
    scope_settings,
)
from fedbench.report.sources import Source
from fedbench.report.tables import (
    View,
    build_view,
    summarise,
    to_latex,
    to_markdown,
    to_rich,
    to_wide,
)
from fedbench.runner.table_config import TableConfig, column_key

SUMMARY_COLUMNS = ("method", "metric", "mean", "std", "n", "paper_mean", "paper_std")
#: summarise()'s working columns, not written to summary.csv.
INTERNAL_COLUMNS = ("setting_json", "values", "seeds", "cell", "paper", "not_run")
STATISTICS = {"final": "final", "best": "best", "last_k_mean": "mean of the last {k}"}


@dataclass
class Report:
    folder: Path
    summary: pd.DataFrame
    table: pd.DataFrame
    rich: Group
    files: list[Path]
    view: View


def _details(
    plan: dict[str, Any],
    table: TableConfig,
    seeds: list[int],
    labels: dict[str, tuple[str, str]] | None = None,
    runs: pd.DataFrame | None = None,
) -> str:
    """'preset quick; 5 seeds (0-4); each run's final evaluation; --set: none', and with --tuned
    what was tuned in which column (`_tuned_text`; labels: setting JSON -> column names). Where
    some of the plan's `runs` have no result, '5 seeds planned (0-4)' and which (`_missing_text`)."""
    statistic = STATISTICS[table.report].format(k=table.last_k)
    seed_text = ", ".join(map(str, seeds))
    if len(seeds) > 2 and seeds == list(range(seeds[0], seeds[-1] + 1)):
        seed_text = f"{seeds[0]}-{seeds[-1]}"
    missing = _missing_text(runs, labels or {}) if runs is not None else ""
    planned = " planned" if missing else ""
    overrides = plan.get("overrides") or []
    return (
        (f"preset {plan['preset']}" if plan.get("preset") else "no preset")
        + f"; {len(seeds)} seed{'s' * (len(seeds) != 1)}{planned} ({seed_text}){missing}; "
        f"each run's {statistic} evaluation; --set: {', '.join(overrides) if overrides else 'none'}"
        + _tuned_text(plan, labels or {})
    )


#: The missing runs the header names one by one; more are counted.
MISSING_NAMED = 6


def _missing_text(runs: pd.DataFrame, labels: dict[str, tuple[str, str]]) -> str:
    """', 1 of 8 runs missing (left out): FedAvg in Dir-0.1 seed 2 (its run folder is gone)':
    the planned runs without a result (collect.read_run), each with its seed and why, the
    first MISSING_NAMED of them by name; runs not run yet are counted, not named."""
    if runs.empty:
        return ""
    missing = runs[runs["status"] == MISSING]
    if missing.empty:
        return ""
    named = []
    for run in missing[missing["reason"] != NOT_RUN].itertuples():
        column = _column_name(str(run.setting), labels)
        where = f"{run.method} in {column}" if column else str(run.method)
        named.append(f"{where} seed {run.seed} ({run.reason})")
    not_run = len(missing) - len(named)
    if len(named) > MISSING_NAMED:
        named = [*named[:MISSING_NAMED], f"{len(named) - MISSING_NAMED} more"]
    if not_run:
        named.append(f"{not_run} not run yet")
    return f", {len(missing)} of {len(runs)} runs missing (left out): {'; '.join(named)}"


def _tuned_text(plan: dict[str, Any], labels: dict[str, tuple[str, str]]) -> str:
    """'; tuned (fedbench tune): FedAvg in Dir-0.1 (algorithm.lr=0.1), not in Dir-1.0 (the
    table's values); not tuned (the table's values): FedAdamW': per row, the columns tuned.yaml
    tuned, with their values, and the columns that ran the table's own values."""
    tuned: dict[str, dict[str, dict[str, Any]]] = plan.get("tuned") or {}
    if not tuned:
        return ""
    columns: dict[str, list[str]] = {}  # row -> its columns (setting JSON), in plan order
    for run in plan["runs"]:
        mine = columns.setdefault(run["method"], [])
        setting = json.dumps(run["setting"])
        if setting not in mine:
            mine.append(setting)
    rows, untuned = [], []
    for method, settings in columns.items():
        cells = tuned.get(method) or {}
        done = [s for s in settings if column_key(json.loads(s)) in cells]
        if not done:
            untuned.append(method)
            continue
        named = []
        for s in done:
            values = cells[column_key(json.loads(s))]
            shown = ", ".join(f"{key}={value}" for key, value in values.items())
            named.append(f"{_column_name(s, labels)} ({shown})")
        text = f"{method} in {' and '.join(named)}"
        others = [_column_name(s, labels) for s in settings if s not in done]
        if others:
            text += f", not in {' and '.join(others)} (the table's values)"
        rows.append(text)
    if untuned:
        rows.append(f"not tuned (the table's values): {', '.join(untuned)}")
    chosen_on = plan.get("tuned_on") or "an unrecorded split (plan.json predates the record)"
    return f"; tuned (fedbench tune, chosen on {chosen_on}): {'; '.join(rows)}"


def _column_name(setting_json: str, labels: dict[str, tuple[str, str]]) -> str:
    """A column by its report name, else by its grid values."""
    label = labels.get(setting_json, ("", ""))[0]
    return label or column_key(json.loads(setting_json))


def _paper_heading(paper_cfgs: list[Cfg]) -> str:
    """'paper (CIFAR-100, ResNet-18 / ViT-Tiny)': the paper's datasets and models."""
    datasets = dict.fromkeys(dataset_label(str(c["data"]["name"])) for c in paper_cfgs)
    models = dict.fromkeys(column_label(["model.name"], [c]) for c in paper_cfgs)
    return f"paper ({' / '.join(datasets)}, {' / '.join(models)})"


def _paper_block(
    table: TableConfig, paper_by_column: dict[str, list[Cfg]], pairs: list[tuple[Cfg, Cfg]]
) -> tuple[str, str, bool]:
    """(heading, caveat, same setting) of the paper's block. The paper's setting is the table
    config without preset and --set; any difference from what ran makes the caveat."""
    if table.paper is None:
        return "", "", False
    if not paper_by_column or not pairs:
        return (
            "paper (its own setting)",
            "The paper's setting could not be resolved from the table config; these numbers may "
            "not be comparable with the table above.",
            False,
        )
    diffs = differences(pairs)
    heading = _paper_heading([c for cfgs in paper_by_column.values() for c in cfgs])
    if not diffs:
        return heading, "", True
    return (
        heading,
        f"{table.title or table.table}: the paper's numbers for its own setting "
        f"({describe(facts(paper_by_column))}); not comparable with the table above, which "
        f"differs in {', '.join(diffs)}.",
        False,
    )


def _column_labels(
    plan: dict[str, Any],
    keys: list[str],
    ran: dict[str, list[Cfg]],
    paper: dict[str, list[Cfg]],
    extra: list[str] | None = None,
) -> dict[str, tuple[str, str]]:
    """setting JSON -> (what ran, the paper's column). Our columns are named by the grid keys'
    values that ran, then the `extra` keys (other settings that follow the column). Columns whose
    runs read the same (a preset that trains digits for both CIFAR columns) name the grid value
    they stand in for."""
    ours_keys = [*keys, *(extra or [])]
    settings = list(dict.fromkeys(json.dumps(r["setting"]) for r in plan["runs"]))
    ours = {s: column_label(ours_keys, ran[s]) if s in ran else "not run" for s in settings}
    repeated = {label for label in ours.values() if list(ours.values()).count(label) > 1}
    for s in settings:
        if ours[s] in repeated and s in ran:
            ours[s] = column_label(ours_keys, ran[s], json.loads(s))
    return {s: (ours[s], column_label(keys, paper[s]) if s in paper else "") for s in settings}


def _named_columns(
    table: TableConfig, labels: dict[str, tuple[str, str]]
) -> tuple[dict[str, tuple[str, str]], str]:
    """The table's `column_labels` in place of the names built from what ran, and the line that
    says what each named column ran ('' when the table names no column)."""
    named = {s: table.named_column(json.loads(s)) for s in labels}
    if not any(named.values()):
        return labels, ""
    out = {s: (named[s] or ours, paper) for s, (ours, paper) in labels.items()}
    legend = "; ".join(f"{out[s][0]}: {ours}" for s, (ours, _) in labels.items() if named[s])
    return out, legend


def build_report(
    folder: Path,
    runs_root: Path | None = None,
    *,
    paper_numbers: bool = False,
    metrics: Sequence[str] = (),
    ci: bool = False,
) -> Report:
    """Write summary.csv, table.csv, table.md, table.tex and curves.png (with curves.pdf and
    curves.caption.txt) into `folder`.

    paper_numbers: also put the paper's numbers into table.tex (a separate, labelled block);
    table.md, table.csv and the terminal always show them apart from ours.
    metrics: reported beside the table's own metrics (e.g. the eval.diagnostics measurements);
    a table with private rows also reports epsilon (privacy_cells).
    ci: cells also show the 95 % interval of the mean (summary.csv always has it)."""
    plan = read_plan(folder)
    runs_root = runs_root or folder.parent / "runs"
    configs = run_configs(plan, runs_root)
    # A table with private rows reports the epsilon each cell spent beside its scores.
    private = any(cfg.get("privacy") for cfg in configs.values())
    table = with_metrics(plan_table(plan), [*metrics, *(["epsilon"] if private else [])])
    runs, curves = collect(folder, runs_root, table)
    summary = summarise(runs, table, ci=ci)
    papers = paper_configs(plan)
    keys = list(table.grid)
    ran_by_column: dict[str, list[Cfg]] = {}
    paper_by_column: dict[str, list[Cfg]] = {}
    pairs: list[tuple[Cfg, Cfg]] = []
    for run in plan["runs"]:
        setting_json = json.dumps(run["setting"])
        ran = configs.get(run["run_id"])
        paper = papers.get((run["method"], setting_json))
        if ran is not None:
            ran_by_column.setdefault(setting_json, []).append(ran)
        if paper is not None:
            paper_by_column.setdefault(setting_json, []).append(paper)
        if ran is not None and paper is not None:
            pairs.append((ran, paper))
    scoped = scope_settings(
        [
            (run["method"], json.dumps(run["setting"]), configs[run["run_id"]])
            for run in plan["runs"]
            if run["run_id"] in configs
        ],
        keys,
    )
    labels = _column_labels(plan, keys, ran_by_column, paper_by_column, scoped.columns)
    labels, columns_legend = _named_columns(table, labels)
    paper_heading, caveat, same = _paper_block(table, paper_by_column, pairs)
    stated = [*scoped.columns, *scoped.base, *(k for r in scoped.rows.values() for k in r)]
    setting = LongSetting.of(
        plan, keys, configs, papers, pairs, same, table.paper is not None, stated
    )
    title = (table.title or table.table) + (
        f", preset {plan['preset']}" if plan.get("preset") else ""
    )
    if table.paper is not None and not same:
        # The title names the paper's setting; the caveat below says how this one differs.
        title += " (not the paper's setting: see what ran)"
    seeds = sorted({int(r["seed"]) for r in plan["runs"]})
    ran_text = describe(facts(ran_by_column)) if ran_by_column else "nothing has run yet"
    if scoped.base:
        ran_text += f"; also {scoped.base_text()}"
    view = build_view(
        summary,
        table,
        labels,
        title=title,
        ran=ran_text,
        rows=scoped.rows_text(),
        columns=columns_legend,
        details=_details(plan, table, seeds, labels, runs),
        paper_label=paper_heading,
        paper_caveat=caveat,
        note=table.note.strip(),
        csv_prefix=setting.dataset_prefix(keys, ran_by_column, paper_by_column),
        privacy=legend_lines(runs),
        ci=ci,
        method_labels=method_labels(runs, list(table.methods)),
        privacy_note=privacy_note(runs),
    )
    files = [folder / name for name in ("summary.csv", "table.csv", "table.md", "table.tex")]
    # Each file atomically (fedbench.files): a full disk or a kill keeps the previous report.
    remove_stale_temporaries(folder)
    write_file(files[0], setting.long(summary).to_csv(index=False))
    write_file(files[1], to_wide(view).to_csv(index=False))
    write_file(files[2], to_markdown(view))
    label = re.sub(r"[^A-Za-z0-9:-]+", "-", folder.name)
    write_file(files[3], to_latex(view, label, paper_numbers=paper_numbers))
    column_titles = {s: labels[s][0] for s in labels}
    files += plot_curves(curves, folder / "curves.png", view, column_titles, list(table.methods))
    if has_budgets(summary):  # a private row at two budgets or more: metric against epsilon
        figure = folder / "privacy_utility.png"
        source = Source(folder, plan, table, summary, runs, configs)
        files += write_figure([source], table.metrics[0], figure, "column")
    return Report(folder, summary, to_wide(view), to_rich(view), files, view)


@dataclass
class LongSetting:
    """How summary.csv labels its rows: by what ran (the resolved values of the grid keys, and of
    every other field where what ran differs from the table's own setting), with the preset and
    the paper's setting as columns of their own. The paper's numbers sit in `paper_mean` /
    `paper_std` only where the paper's setting ran; otherwise in `paper_mean_at_paper_setting` /
    `paper_std_at_paper_setting`, so that no script reads a digits run as a CIFAR-100 one."""

    #: The table's grid keys (the setting columns), then the other fields that differ.
    keys: list[str]
    extra: list[str]
    same: bool
    has_paper: bool
    preset: str | None
    ran: dict[tuple[str, str], Cfg]
    paper: dict[tuple[str, str], Cfg]
    #: The other settings the report states (scope_settings: those that follow the column, are
    #: the same in every run, or follow the row), as setting columns after the others.
    stated: list[str] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        plan: dict[str, Any],
        keys: list[str],
        configs: dict[str, Cfg],
        papers: dict[tuple[str, str], Cfg],
        pairs: list[tuple[Cfg, Cfg]],
        same: bool,
        has_paper: bool,
        stated: list[str] | None = None,
    ) -> LongSetting:
        ran: dict[tuple[str, str], Cfg] = {}
        for run in plan["runs"]:
            cell = (run["method"], json.dumps(run["setting"]))
            if run["run_id"] in configs:
                ran.setdefault(cell, configs[run["run_id"]])
        extra = [k for k in differing_keys(pairs) if k not in keys and k != "privacy"]
        return cls(keys, extra, same, has_paper, plan.get("preset"), ran, papers, stated or [])

    @property
    def differs(self) -> bool:
        return not self.same and (bool(self.extra) or self.has_paper)

    def dataset_prefix(
        self, keys: list[str], ran: dict[str, list[Cfg]], paper: dict[str, list[Cfg]]
    ) -> tuple[str, str]:
        """table.csv's header prefixes (ours, the paper's): the datasets, where they differ and
        are not a grid key (a digits run never reads as a CIFAR-100 one)."""
        if "data.name" in keys or "data.name" not in self.extra:
            return "", ""
        return _datasets(ran), _datasets(paper)

    def long(self, summary: pd.DataFrame) -> pd.DataFrame:
        """summary.csv: method, the setting columns (resolved values), metric, mean, std, n,
        the paper's numbers (paper_mean, paper_std, or when the setting differs: preset, the
        paper's setting as paper_<key> and paper_mean_at_paper_setting,
        paper_std_at_paper_setting), then the rest (the 95 % interval of the mean ci95_low,
        ci95_high, the run counts, best, test, p_vs_best, p_holm, tie)."""
        others = [*self.extra] if self.differs else []
        if "partition.kind" in [*self.keys, *others]:  # what each kind reads, blank where not
            others += KIND_FACTS
        others += self.stated
        # One order whatever ran first (setting_order): the same columns in the same places
        # from one sweep to the next.
        rest_of_setting = [k for k in dict.fromkeys(others) if k not in self.keys]
        setting = [*self.keys, *sorted(rest_of_setting, key=setting_order)]
        stats = list(SUMMARY_COLUMNS[1:5])
        if self.differs and self.has_paper:
            paper_cols = [
                "preset",
                *(f"paper_{k}" for k in setting),
                *(f"{c}_at_paper_setting" for c in PAPER_COLUMNS),
            ]
        else:
            paper_cols = (["preset"] if self.differs else []) + list(PAPER_COLUMNS)
        front = ["method", *setting, *stats, *paper_cols]
        if summary.empty:
            return pd.DataFrame(columns=front)
        out = summary.copy()
        cells = list(zip(out["method"], out["setting_json"], strict=True))
        for key in setting:
            grid = out[key] if key in out else pd.Series([None] * len(out), index=out.index)
            out[key] = [
                _value(self.ran[c], key) if c in self.ran else g
                for c, g in zip(cells, grid, strict=True)
            ]
        if self.differs:
            out["preset"] = self.preset or ""
        if self.differs and self.has_paper:
            for key in setting:
                out[f"paper_{key}"] = [
                    _value(self.paper[c], key) if c in self.paper else None for c in cells
                ]
            for column in PAPER_COLUMNS:
                out[f"{column}_at_paper_setting"] = out[column]
        rest = [
            c
            for c in summary.columns
            if c not in front and c not in INTERNAL_COLUMNS and c not in PAPER_COLUMNS
        ]
        return out[front + rest]


PAPER_COLUMNS = ("paper_mean", "paper_std")
#: The run config's sections in the order a config file lists them (RunConfig's fields).
SECTIONS = ("seed", "data", "partition", "model", "fl", "algorithm", "privacy", "eval", "runtime")


def setting_order(key: str) -> tuple[int, str]:
    """summary.csv's order of the setting columns after the grid keys: by the run config's
    section (data, partition, model, fl, algorithm, privacy, eval, runtime), alphabetically
    within a section; a key of no known section last."""
    section = key.split(".")[0]
    return (SECTIONS.index(section) if section in SECTIONS else len(SECTIONS), key)


def _value(cfg: Cfg, key: str) -> Any:
    if key in KIND_FACTS and not reads(cfg, key.split(".")[1]):
        return None  # a partition setting its kind does not read
    value = get_path(cfg, key)
    return json.dumps(value) if isinstance(value, dict | list) else value


def _datasets(cfgs: dict[str, list[Cfg]]) -> str:
    names = dict.fromkeys(
        dataset_label(str(get_path(c, "data.name"))) for v in cfgs.values() for c in v
    )
    return " or ".join(names)
