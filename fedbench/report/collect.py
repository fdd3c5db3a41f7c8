"""Read a table folder's plan and its runs' folders into pandas frames (one row per run, and
one row per run and evaluated round)."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fedbench.config import read_yaml
from fedbench.engine.run_folder import RunFolder, child_folder
from fedbench.errors import FedbenchError
from fedbench.metrics_log import read_rows
from fedbench.personal.summary import PERSONAL_METRICS
from fedbench.readback import BadFile, read_plan_file
from fedbench.report.privacy_cells import run_privacy
from fedbench.runner.table_config import (
    DIAGNOSTIC_METRICS,
    METRICS,
    TableConfig,
    parse_table_config,
)
from fedbench.suggest import unknown

log = logging.getLogger("fedbench")

PLAN_FILE = "plan.json"
#: The status of a planned run without a result; its `reason` says why (below, or a file that
#: does not read back).
MISSING = "missing"
NOT_RUN = "not run yet"
UNFINISHED = "unfinished (no summary.json yet)"
#: plan.json statuses of runs that wrote a summary.json: without one the run is gone.
SUMMARY_STATUSES = ("completed", "diverged")
#: plan.json statuses of runs that may have written nothing (refused up front, or failed
#: before the run folder existed): without a summary.json, plan.json's record stands.
NO_SUMMARY_STATUSES = ("unsupported", "failed")
#: Lower is better for these metrics (best = min, bold = min).
LOWER_IS_BETTER = {
    "train_loss",
    "test_loss",
    "comm",
    "comm_up",
    "comm_down",
    "wall_s",
    "rounds_to_target",
    # the spread of accuracy across clients: lower is fairer
    *(m for m in PERSONAL_METRICS if m.endswith("_std")),
}


def read_plan(folder: Path) -> dict[str, Any]:
    path = folder / PLAN_FILE
    if not path.is_file():
        raise FedbenchError(
            f"{folder} is not a table folder (no {PLAN_FILE}); give DIR/<table>[-<preset>] "
            "written by `fedbench run` or `fedbench ablate`"
        )
    return read_plan_file(path)  # validated: a bad plan.json is one line (BadFile)


def plan_table(plan: dict[str, Any]) -> TableConfig:
    return parse_table_config(plan["table"], "plan.json")


def statistic(rows: list[dict[str, Any]], metric: str, how: str, last_k: int) -> float:
    """The value a table reports for one run: final | best | last_k_mean | mean over its
    evaluations."""
    values = [r[metric] for r in rows if r.get(metric) is not None]
    if not values:
        return math.nan
    if how == "mean":
        return sum(values) / len(values)
    if how == "best":
        return min(values) if metric in LOWER_IS_BETTER else max(values)
    if how == "last_k_mean":
        tail = values[-last_k:]
        return sum(tail) / len(tail)
    return values[-1]


def _summary_metric(summary: dict[str, Any], metric: str) -> float:
    if metric == "comm":
        d, up = summary.get("d"), summary.get("comm_up")
        return up / d if d and up is not None else math.nan
    if metric == "best_test_acc":
        value = (summary.get("best") or {}).get("test_acc")
        return float(value) if value is not None else math.nan
    value = summary.get(metric)
    return float(value) if value is not None else math.nan


def with_metrics(table: TableConfig, metrics: Sequence[str]) -> TableConfig:
    """`table` also reporting `metrics` (e.g. an eval.diagnostics measurement); an unknown name
    is a one-line error."""
    for metric in metrics:
        if metric not in METRICS:
            raise FedbenchError(unknown("metric", metric, METRICS))
    extra = [m for m in dict.fromkeys(metrics) if m not in table.metrics]
    return table.model_copy(update={"metrics": [*table.metrics, *extra]}) if extra else table


def collect(
    folder: Path, runs_root: Path | None = None, table: TableConfig | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, curves). runs: method, setting (JSON), seed, run_id, status, reason, the run's
    privacy (privacy_cells.run_privacy: epsilon, delta, sigma, clip, accounting; empty without
    DP), one column per metric of `table` (default: the plan's). curves: method, setting, seed,
    round, train_loss, test_acc."""
    plan = read_plan(folder)
    table = table or plan_table(plan)
    runs_root = runs_root or folder.parent / "runs"
    records, curve_rows = [], []
    for run in plan["runs"]:
        run_dir = child_folder(runs_root, run["run_id"])
        summary, rows, status, reason = read_run(run, run_dir)
        setting = json.dumps(run["setting"], sort_keys=False)
        record: dict[str, Any] = {
            "method": run["method"],
            "setting": setting,
            "seed": run["seed"],
            "run_id": run["run_id"],
            "status": status,
            "reason": reason,
            # rounds_to_target: "not reached in R rounds" needs R.
            "rounds": (summary or {}).get("rounds"),
            "threads": cpu_threads(summary),
        }
        private = (summary or {}).get("epsilon") is not None
        config = run_dir / "config.yaml"
        cfg = read_yaml(config) if private and config.is_file() else None  # privacy.clip
        record.update(run_privacy(summary, cfg))
        for metric in table.metrics:
            if metric in ("test_acc", "train_loss", "test_loss"):
                record[metric] = statistic(rows, metric, table.report, table.last_k)
            elif metric in DIAGNOSTIC_METRICS:
                record[metric] = statistic(rows, metric, "mean", table.last_k)
            elif metric in PERSONAL_METRICS:  # measured at the last round only
                record[metric] = statistic(rows, metric, "final", table.last_k)
            else:
                record[metric] = _summary_metric(summary or {}, metric)
        records.append(record)
        for row in rows:
            curve_rows.append(
                {
                    "method": run["method"],
                    "setting": setting,
                    "seed": run["seed"],
                    "round": row["round"],
                    "train_loss": row.get("train_loss"),
                    "test_acc": row.get("test_acc"),
                }
            )
    runs = pd.DataFrame.from_records(records)
    curves = pd.DataFrame.from_records(
        curve_rows, columns=["method", "setting", "seed", "round", "train_loss", "test_acc"]
    )
    return runs, curves


def cpu_threads(summary: dict[str, Any] | None) -> int | None:
    """The torch thread count a CPU run trained with (summary.json's `torch_threads`): training's
    sums are split over the threads, so runs at two counts differ in their last digits. None for
    a run on a GPU (whose arithmetic the count does not touch) or a summary without it."""
    if not summary or not str(summary.get("device") or "cpu").startswith("cpu"):
        return None
    value = summary.get("torch_threads")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_run(
    run: dict[str, Any], run_dir: Path
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], str, str | None]:
    """(summary.json, metrics.jsonl rows, status, reason) of one planned run, from its folder.

    Only a summary.json that reads back, beside its metrics.jsonl, makes a result. Without one
    the run is `missing`, and the reason says why: never run, unfinished, its folder or a file of
    it gone, or a file that does not read back (a warning names the file; plan.json's record of a
    run that completed is not a result). A run that plan.json records as refused up front
    (unsupported) or failed without a summary keeps that record: it wrote nothing to lose."""
    folder = RunFolder(run_dir)
    planned = run.get("status")
    try:
        summary = folder.read_summary()  # validated: a bad one is a BadFile
        rows = read_rows(folder.metrics, strict=True, fix=folder.retrain_hint) if summary else []
    except BadFile as bad:
        reason = f"{bad.path.name} {bad.what}"
        log.warning("warning: %s: %s; the report counts the run as missing", bad.path, bad.what)
        return None, [], MISSING, reason
    if summary is not None:
        status = summary.get("status") or MISSING
        if status == "completed" and not folder.metrics.is_file():
            _warn_gone(run, "its metrics.jsonl is gone")
            return None, [], MISSING, "its metrics.jsonl is gone"
        return summary, rows, status, summary.get("error") or run.get("reason")
    if planned in NO_SUMMARY_STATUSES:
        return None, [], str(planned), run.get("reason")
    if planned in SUMMARY_STATUSES:
        gone = "its summary.json is gone" if run_dir.is_dir() else "its run folder is gone"
        _warn_gone(run, gone)
        return None, [], MISSING, gone
    return None, [], MISSING, UNFINISHED if run_dir.is_dir() else NOT_RUN


def _warn_gone(run: dict[str, Any], what: str) -> None:
    """The warning line of a run whose results are gone (the plan's record that it finished,
    where it has one, is no result)."""
    status = run.get("status")
    recorded = f" (plan.json records it as {status})" if status in SUMMARY_STATUSES else ""
    log.warning(
        "warning: run %s (%s, seed %s): %s%s; the report counts it as missing",
        run["run_id"],
        run["method"],
        run["seed"],
        what,
        recorded,
    )


def run_configs(plan: dict[str, Any], runs_root: Path) -> dict[str, dict[str, Any]]:
    """run_id -> the resolved config of each planned run: its folder's config.yaml (what ran),
    else the plan re-expanded (a run that never started: the config it would run, identified by
    its run_id, a hash of that config)."""
    from fedbench.runner.table_config import expand

    configs: dict[str, dict[str, Any]] = {}
    try:
        seeds = len({run["seed"] for run in plan["runs"]})
        expanded = expand(
            plan_table(plan),
            preset=plan.get("preset"),
            seeds=seeds,
            overrides=plan.get("overrides") or [],
            tuned=plan.get("tuned") or None,
        )
        configs.update({run.run_id: run.cfg.to_dict() for run in expanded.runs})
    except FedbenchError:
        pass  # a plan written by another version: the run folders alone say what ran
    for run in plan["runs"]:
        path = child_folder(runs_root, run["run_id"]) / "config.yaml"
        if path.is_file():
            configs[run["run_id"]] = read_yaml(path)
    return {
        run["run_id"]: configs[run["run_id"]] for run in plan["runs"] if run["run_id"] in configs
    }


def paper_configs(plan: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(method, setting JSON) -> the paper's setting of that cell: the table config without its
    preset and --set overrides (on the columns that ran). Empty when that does not validate."""
    from fedbench.runner.table_config import expand

    try:
        paper = expand(plan_table(plan), seeds=1)
    except FedbenchError:
        return {}
    return {(run.method, json.dumps(run.setting)): run.cfg.to_dict() for run in paper.runs}
