"""Run management: list run folders (`fedbench runs`) and overlay their curves (`fedbench plot`).

A run folder (DIR/runs/<run_id>/) holds config.yaml, metrics.jsonl and, once it has ended,
summary.json. Runs are told apart by the config fields whose values differ among the runs
listed, runtime fields included (a sequential and a vectorised run differ in wall time), since
the folder name's hash says only that they differ.
"""

from __future__ import annotations

import difflib
import json
import logging
from pathlib import Path
from typing import Any

import pandas as pd
from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from fedbench.config import parse_override, read_yaml
from fedbench.engine.run_folder import RunFolder
from fedbench.errors import FedbenchError
from fedbench.metrics_log import read_rows
from fedbench.privacy.status import short_label
from fedbench.readback import BadFile
from fedbench.report.ran import KEY_FORMATS, flatten, value_label

log = logging.getLogger("fedbench")

#: Config fields that never tell runs apart in a listing: where the same data is read from.
IGNORED = ("data.root", "data.path", "data.download")
#: The final metrics a listing shows, from summary.json.
FINAL_METRICS = ("test_acc", "train_loss", "test_loss")


def find_run_folders(root: Path) -> list[Path]:
    """Run folders under ROOT: ROOT itself, ROOT/*/ (a runs/ folder) or ROOT/runs/*/."""
    if not root.exists():
        raise FedbenchError(f"{root} does not exist; give an output folder of fedbench (--out)")
    if (root / "config.yaml").is_file():
        return [root]
    # A link is a run's old name, kept pointing at its current folder (RunFolder.for_config):
    # each run is listed once.
    folders = sorted(p.parent for p in root.glob("*/config.yaml") if not p.parent.is_symlink())
    folders += sorted(
        p.parent for p in root.glob("runs/*/config.yaml") if not p.parent.is_symlink()
    )
    if not folders:
        raise FedbenchError(
            f"no run folders under {root} (looked for {root}/runs/*/config.yaml and "
            f"{root}/*/config.yaml); runs are written by `fedbench train` or `fedbench run`"
        )
    return folders


def _read_summary(folder: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(summary.json validated, None), or (None, why it is unusable); (None, None) without one.
    A finished run's metrics.jsonl is read strictly too: no writer appends to it any more."""
    try:
        summary = RunFolder(folder).read_summary()
        if summary is not None:
            read_rows(folder / "metrics.jsonl", strict=True)
        return summary, None
    except BadFile as bad:
        return None, f"{bad.path.name} {bad.what}"


def _read_config(folder: Path) -> tuple[dict[str, Any], str | None]:
    """(config.yaml, None), or ({}, why it is unusable): one foreign or damaged folder is listed
    as unreadable, not a reason to refuse the listing."""
    try:
        return read_yaml(folder / "config.yaml"), None
    except FedbenchError as exc:
        return {}, f"config.yaml: {exc}"


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


def short_names(keys: list[str]) -> dict[str, str]:
    """Dotted key -> its short name where no other key of `keys` shares it (`algorithm.name` ->
    `algorithm`, `algorithm.lr` -> `lr`), else the dotted key (`partition.alpha` beside
    `algorithm.alpha`)."""
    shorts = [k.split(".")[0] if k.endswith(".name") else k.split(".")[-1] for k in keys]
    return {
        key: short if shorts.count(short) == 1 else key
        for key, short in zip(keys, shorts, strict=True)
    }


def label(flat: dict[str, Any], keys: list[str]) -> str:
    """'algorithm=fedadamw, lr=0.003, Dir-0.1': the run's values of `keys`. Keys with a reading of
    their own say what they are (`Dir-0.1` for partition.alpha, `α=0.5` for FedAdamW's
    algorithm.alpha, `CNN` for model.name); the others read `short=value`, with the dotted key
    where short names clash. Fields the run does not have are left out."""
    names = short_names(keys)
    parts = []
    for key in keys:
        if key not in flat:
            continue
        if key in KEY_FORMATS or key in ("model.name", "data.name"):
            parts.append(value_label(key, flat[key]))
        else:
            parts.append(f"{names[key]}={flat[key]}")
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
    records: list[dict[str, Any]] = []
    for folder in find_run_folders(root):
        config, bad_config = _read_config(folder)
        summary, bad_summary = _read_summary(folder)
        records.append(
            {"folder": folder, "config": config, "flat": flatten(config), "summary": summary}
        )
        bad = bad_config or bad_summary
        records[-1]["status"] = "unreadable" if bad else _status(folder, summary)
        if bad:
            log.warning("warning: %s: %s; the listing shows it as unreadable", folder, bad)
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
        # Its accounting status and direction (privacy.status; derived for older summaries).
        row["accounting"] = (
            short_label(summary.get("privacy_accounting"))
            if summary.get("epsilon") is not None
            else None
        )
        row["wall_s"] = summary.get("wall_s")
        row["folder"] = str(r["folder"])
        rows.append(row)
    frame = pd.DataFrame.from_records(rows)
    if not frame.empty and frame["epsilon"].isna().all():
        frame = frame.drop(columns=["epsilon", "accounting"])
    return frame


#: Listing columns shown in the terminal only when they differ between the runs listed.
CONSTANT_HIDDEN = ("status", "round")
#: Columns the terminal leaves out, in this order, while the listing is wider than the terminal
#: (the run id then fits on one line): those the run id spells already (seed, algorithm), then
#: the measurements after test_acc. `--format csv` / `json` keep every column.
NARROW_DROPS = ("seed", "algorithm.name", "wall_s", "test_loss", "train_loss", "round")


def _column_width(frame: pd.DataFrame, column: str) -> int:
    header = _header(str(column))
    return max([len(line) for line in header.splitlines()] + [len(_text(v)) for v in frame[column]])


def _fit(frame: pd.DataFrame, width: int | None) -> tuple[pd.DataFrame, list[str]]:
    """The frame without NARROW_DROPS columns, in order, until its table fits `width`
    characters (_needed); also the columns left out."""
    dropped: list[str] = []
    for column in (None, *NARROW_DROPS):
        if column is not None and column in frame:
            frame = frame.drop(columns=[column])
            dropped.append(column)
        if width is None or _needed(frame) <= width:
            break
    return frame, dropped


def _needed(frame: pd.DataFrame) -> int:
    """The characters a listing of `frame` needs: its columns and two spaces beside each (the
    table's padding)."""
    return sum(_column_width(frame, c) + 2 for c in frame.columns)


def as_rich(frame: pd.DataFrame, title: str, width: int | None = None) -> Table | Group:
    """The terminal listing: only the columns that differ between the runs (a value every run
    shares, such as "completed" or the round, moves to the title), dotted config keys broken at
    their dots over the header's lines, run ids in full on one line (never cut to `fedad…`, nor
    folded: in a terminal of `width` columns the NARROW_DROPS columns make room first, named in
    the title; when that is not enough, the table numbers its rows and the run ids follow it,
    one per line), numbers to 4 significant digits, blanks for missing values."""
    frame = frame.drop(columns=["folder"], errors="ignore")
    shared = []
    for column in CONSTANT_HIDDEN:
        if column in frame and len(frame) > 1 and frame[column].nunique(dropna=False) == 1:
            shared.append(f"{column} {_text(frame[column].iloc[0])}")
            frame = frame.drop(columns=[column])
    fitted, dropped = _fit(frame, width)
    ids: list[str] = []
    if width is not None and "run_id" in frame and _needed(fitted) > width:
        ids = [str(v) for v in frame["run_id"]]
        frame = frame.drop(columns=["run_id"])
        frame.insert(0, "#", [str(i) for i in range(1, len(ids) + 1)])
        fitted, dropped = _fit(frame, width)
    frame = fitted
    notes = [f"every run: {', '.join(shared)}"] if shared else []
    if dropped:
        notes.append(f"narrow terminal: no {', '.join(dropped)} (--format csv has them)")
    view = Table(
        title=title + (f" ({'; '.join(notes)})" if notes else ""),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    for column in frame.columns:
        # The run id stays on one line; the other columns keep their full width too.
        width_ = _column_width(frame, column)
        view.add_column(_header(str(column)), min_width=width_, no_wrap=column == "run_id")
    for row in frame.itertuples(index=False):
        view.add_row(*(_text(v) for v in row))
    if not ids:
        return view
    key = "\n".join(f"{i:>{len(str(len(ids)))}} {run_id}" for i, run_id in enumerate(ids, 1))
    return Group(view, Text("run ids:"), Text(key, no_wrap=True, overflow="ignore"))


def _header(key: str) -> str:
    """`algorithm.name` -> `algorithm`; other dotted keys in full, one part per line
    (`partition.` over `alpha`: never `alpha` alone, which FedAdamW's algorithm.alpha also is)."""
    if key.count(".") == 1 and key.endswith(".name"):
        return key.split(".")[0]
    return key.replace(".", ".\n")


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def as_json(frame: pd.DataFrame) -> str:
    """The listing as a JSON array of objects (missing values null), for scripts."""
    records = [
        {str(k): (None if _text(v) == "" else v) for k, v in row.items()}
        for row in frame.astype(object).to_dict(orient="records")
    ]
    return json.dumps(records, indent=1, default=str)


def _last_row(folder: Path) -> dict[str, Any]:
    """The last evaluation of a run (a run still going has no summary.json yet)."""
    rows = read_rows(folder / "metrics.jsonl")
    return rows[-1] if rows else {}


def _run_folder(run: str, runs_root: Path) -> Path:
    """A run folder given by its path, or by its id under RUNS_ROOT (`--root`'s runs/)."""
    for path in (Path(run), runs_root / run):
        if (path / "metrics.jsonl").is_file():
            return path
    if Path(run).is_dir() or (runs_root / run).is_dir():
        folder = Path(run) if Path(run).is_dir() else runs_root / run
        raise FedbenchError(
            f"{folder} has no metrics.jsonl: not a run folder, or a run that has not evaluated "
            "yet; list runs with `fedbench runs DIR`"
        )
    raise FedbenchError(
        f"no run {run!r}: not a folder, nor a run id in {runs_root} (--root "
        f"{runs_root.parent}); pass --root DIR, the --out the runs were written to, or the run "
        "folder's path; list runs with `fedbench runs DIR`"
    )


def read_curves(runs: list[str], runs_root: Path) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """RUN (a run folder, or a run id under RUNS_ROOT) -> its metrics.jsonl as a frame, labelled
    by the fields that tell the runs apart; also returns those fields."""
    folders = [_run_folder(run, runs_root) for run in runs]
    configs = [read_yaml(f / "config.yaml") for f in folders]
    keys = distinguishing(configs)
    series: dict[str, pd.DataFrame] = {}
    for folder, config in zip(folders, configs, strict=True):
        name = label(flatten(config), keys) or folder.name
        if name in series:
            name = f"{name} ({folder.name})"
        series[name] = pd.DataFrame.from_records(read_rows(folder / "metrics.jsonl"))
    return series, keys


def check_metric(series: dict[str, pd.DataFrame], metric: str) -> None:
    """`fedbench plot --metric M`: every run's metrics.jsonl must have M (the error names the
    metrics they do have)."""
    missing = [name for name, rows in series.items() if metric not in rows.columns]
    if missing:
        have = sorted({c for rows in series.values() for c in rows.columns} - {"round"})
        raise FedbenchError(
            f"--metric {metric} is not in the metrics.jsonl of {missing[0]}; "
            f"choose one of {', '.join(have)}"
        )


#: `fedbench runs --format`: the terminal table, or every column for scripts.
FORMATS = ("table", "csv", "json")


def output_format(format_: str, csv: bool = False) -> str:
    """The format `fedbench runs --format F [--csv]` asks for (`--csv` is `--format csv`)."""
    if format_ not in FORMATS:
        raise FedbenchError(f"--format {format_!r} is not a format; use table, csv or json")
    if csv and format_ not in ("table", "csv"):
        raise FedbenchError(f"--csv and --format {format_} disagree; give one of them")
    return "csv" if csv else format_


def runs_view(
    root: Path,
    where: list[str] | None = None,
    format_: str = "table",
    csv: bool = False,
    width: int | None = None,
) -> str | Table | Group:
    """`fedbench runs`: the run folders under ROOT as a terminal table (fitted to `width`
    columns, see as_rich), or as the text of a CSV or JSON listing (every column)."""
    shown = output_format(format_, csv)
    frame = list_runs(root, where or [])
    if shown == "csv":
        return str(frame.to_csv(index=False))
    if shown == "json":
        return as_json(frame) + "\n"
    return as_rich(frame, f"runs in {root}: {len(frame)}", width)
