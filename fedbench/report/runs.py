"""Run management: list run folders (`fedbench runs`) and overlay their curves (`fedbench plot`).

A run folder (DIR/runs/<run_id>/) holds config.yaml, metrics.jsonl and, once it has ended,
summary.json. Runs are told apart by the config fields whose values differ among the runs
listed (the folder name's hash says only that they differ).
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

import pandas as pd

from fedbench.config import parse_override, read_yaml
from fedbench.errors import FedbenchError
from fedbench.metrics_log import read_rows
from fedbench.report.ran import flatten

#: Config fields that never tell runs apart in a listing (where data lives, devices, threads).
IGNORED = ("runtime.", "data.root", "data.path", "data.download")
#: The final metrics a listing shows, from summary.json.
FINAL_METRICS = ("test_acc", "train_loss", "test_loss")


def find_run_folders(root: Path) -> list[Path]:
    """Run folders under ROOT: ROOT itself, ROOT/*/ (a runs/ folder) or ROOT/runs/*/."""
    if not root.exists():
        raise FedbenchError(f"{root} does not exist; give an output folder of fedbench (--out)")
    if (root / "config.yaml").is_file():
        return [root]
    folders = sorted(p.parent for p in root.glob("*/config.yaml"))
    folders += sorted(p.parent for p in root.glob("runs/*/config.yaml"))
    if not folders:
        raise FedbenchError(
            f"no run folders under {root} (looked for {root}/runs/*/config.yaml and "
            f"{root}/*/config.yaml); runs are written by `fedbench train` or `fedbench run`"
        )
    return folders


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except json.JSONDecodeError:
        return None


def _status(folder: Path, summary: dict[str, Any] | None) -> str:
    if summary is not None:
        return str(summary.get("status", "unknown"))
    return "interrupted" if (folder / "checkpoint.pt").is_file() else "started"


def distinguishing(configs: list[dict[str, Any]]) -> list[str]:
    """The dotted config fields that tell the configs apart, in config order: fields every config
    has whose values differ (algorithm.name, algorithm.lr, ...), and fields that differ among the
    configs of one algorithm (algorithm.alpha of two FedAdamW runs); an algorithm's own fields
    are not listed merely because another algorithm lacks them."""
    flat = [flatten(c) for c in configs]
    keys = [k for k in dict.fromkeys(k for f in flat for k in f) if not k.startswith(IGNORED)]

    def differ(key: str, group: list[dict[str, Any]]) -> bool:
        values = {json.dumps(f[key], sort_keys=True) for f in group if key in f}
        return len(values) > 1

    groups: dict[Any, list[dict[str, Any]]] = {}
    for f in flat:
        groups.setdefault(f.get("algorithm.name"), []).append(f)
    return [
        k
        for k in keys
        if (all(k in f for f in flat) and differ(k, flat))
        or any(differ(k, group) for group in groups.values())
    ]


def label(flat: dict[str, Any], keys: list[str]) -> str:
    """'algorithm=fedadamw, lr=0.003, partition.alpha=0.1': the run's values of `keys` (short
    names where unambiguous; fields the run does not have are left out)."""
    shorts = [k.split(".")[0] if k.endswith(".name") else k.split(".")[-1] for k in keys]
    parts = []
    for key, short in zip(keys, shorts, strict=True):
        if key in flat:
            name = short if shorts.count(short) == 1 else key
            parts.append(f"{name}={flat[key]}")
    return ", ".join(parts)


def _matches(value: Any, wanted: Any) -> bool:
    if isinstance(value, (int, float)) and isinstance(wanted, (int, float)):
        return float(value) == float(wanted)
    return str(value) == str(wanted)


def _filter(records: list[dict[str, Any]], where: list[str]) -> list[dict[str, Any]]:
    """Keep the records whose every `key=value` holds (a config field, or status)."""
    known = {k for r in records for k in r["flat"]} | {"status"}
    for item in where:
        path, wanted = parse_override(item)
        key = ".".join(path)
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise FedbenchError(f"--where {item}: no run has a field {key!r}{hint}")
        records = [
            r
            for r in records
            if _matches(r["status"] if key == "status" else r["flat"].get(key), wanted)
        ]
    return records


def list_runs(root: Path, where: list[str] | None = None) -> pd.DataFrame:
    """One row per run folder: run_id, status, the fields that tell the runs apart, rounds
    evaluated, the final metrics, epsilon (private runs), wall_s and the folder."""
    records = []
    for folder in find_run_folders(root):
        config = read_yaml(folder / "config.yaml")
        summary = _read_json(folder / "summary.json")
        records.append(
            {"folder": folder, "config": config, "flat": flatten(config), "summary": summary}
        )
        records[-1]["status"] = _status(folder, summary)
    records = _filter(records, where or [])
    keys = distinguishing([r["config"] for r in records])
    rows = []
    for r in records:
        summary = r["summary"] or {}
        final = summary.get("final") or {}
        metrics = _last_row(r["folder"])
        row: dict[str, Any] = {"run_id": r["folder"].name, "status": r["status"]}
        row.update({k: r["flat"].get(k) for k in keys})
        row["round"] = final.get("round", metrics.get("round"))
        for metric in FINAL_METRICS:
            row[metric] = final.get(metric, metrics.get(metric))
        row["epsilon"] = summary.get("epsilon")
        row["wall_s"] = summary.get("wall_s")
        row["folder"] = str(r["folder"])
        rows.append(row)
    frame = pd.DataFrame.from_records(rows)
    if not frame.empty and frame["epsilon"].isna().all():
        frame = frame.drop(columns=["epsilon"])
    return frame


def as_text(frame: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """(columns, rows) of a listing as text: 4 significant digits, blanks for missing values."""
    rows = [
        ["" if pd.isna(v) else f"{v:.4g}" if isinstance(v, float) else str(v) for v in row]
        for row in frame.itertuples(index=False)
    ]
    return [str(c) for c in frame.columns], rows


def _last_row(folder: Path) -> dict[str, Any]:
    """The last evaluation of a run (a run still going has no summary.json yet)."""
    rows = read_rows(folder / "metrics.jsonl")
    return rows[-1] if rows else {}


def read_curves(runs: list[str], runs_root: Path) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """RUN (a run folder, or a run id under RUNS_ROOT) -> its metrics.jsonl as a frame, labelled
    by the fields that tell the runs apart; also returns those fields."""
    folders = []
    for run in runs:
        path = Path(run)
        if not (path / "metrics.jsonl").is_file() and (runs_root / run / "metrics.jsonl").is_file():
            path = runs_root / run
        if not (path / "metrics.jsonl").is_file():
            raise FedbenchError(
                f"{run} is not a run folder with metrics.jsonl (also looked in {runs_root / run}); "
                "list runs with `fedbench runs DIR`"
            )
        folders.append(path)
    configs = [read_yaml(f / "config.yaml") for f in folders]
    keys = distinguishing(configs)
    series: dict[str, pd.DataFrame] = {}
    for folder, config in zip(folders, configs, strict=True):
        name = label(flatten(config), keys) or folder.name
        if name in series:
            name = f"{name} ({folder.name})"
        series[name] = pd.DataFrame.from_records(read_rows(folder / "metrics.jsonl"))
    return series, keys
