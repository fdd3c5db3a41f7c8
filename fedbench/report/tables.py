"""mean ± std over seeds: the long summary.csv, and the paper-layout table.csv / table.md /
table.tex, plus the rich table printed at the end of a sweep."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pandas as pd
from rich.table import Table

from fedbench.report.collect import LOWER_IS_BETTER
from fedbench.report.paper import paper_value
from fedbench.runner.table_config import ROW_METRICS, TableConfig

DIGITS = {
    "test_acc": 2,
    "best_test_acc": 2,
    "train_loss": 3,
    "test_loss": 3,
    "comm": 2,
    "wall_s": 1,
    "rounds_to_target": 0,
}


def fmt(value: float, metric: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if metric in ("comm_up", "comm_down"):
        return f"{value:.3g}"
    return f"{value:.{DIGITS.get(metric, 3)}f}"


def setting_label(setting: dict[str, Any]) -> str:
    """'model=resnet18, alpha=0.6' (short keys: the last part of the dotted key when unique)."""
    shorts = [key.split(".")[0] if key.endswith(".name") else key.split(".")[-1] for key in setting]
    names = [
        short if shorts.count(short) == 1 else key
        for key, short in zip(setting, shorts, strict=True)
    ]
    return ", ".join(f"{n}={v}" for n, v in zip(names, setting.values(), strict=True)) or "all"


def _unavailable_text(reason: str | None) -> str:
    """'blocks: hessian is not available ...' -> 'needs blocks: hessian'."""
    if (reason or "").startswith("not implemented"):
        return reason or ""
    match = re.match(r"\s*(\S+: \S+) is not (available|implemented|supported)", reason or "")
    if match:
        return f"needs {match.group(1)}"
    return f"unsupported: {(reason or '').split(';')[0]}"


def summarise(runs: pd.DataFrame, table: TableConfig) -> pd.DataFrame:
    """Long format: method, setting columns, metric, mean, std (ddof 1), n, paper_mean,
    paper_std, then the run counts by status and the cell text of the paper layout."""
    records = []
    settings = list(dict.fromkeys(runs["setting"])) if len(runs) else []
    methods = [m for m in table.methods if m in set(runs["method"])]
    for method in methods:
        for setting_json in settings:
            setting = json.loads(setting_json)
            cell = runs[(runs["method"] == method) & (runs["setting"] == setting_json)]
            if cell.empty:
                continue
            counts = cell["status"].value_counts().to_dict()
            for metric in table.metrics:
                ok = cell[(cell["status"] == "completed") & cell[metric].notna()][metric]
                n = len(ok)
                mean = float(ok.mean()) if n else math.nan
                std = float(ok.std(ddof=1)) if n > 1 else math.nan
                p_mean, p_std = paper_value(table.paper, method, setting, metric)
                reasons = cell[cell["status"] == "unsupported"]["reason"]
                # rounds_to_target: completed runs that never reached the target (no value).
                unreached = cell[(cell["status"] == "completed") & cell[metric].isna()]
                record = {
                    "method": method,
                    **setting,
                    "metric": metric,
                    "mean": mean,
                    "std": std,
                    "n": n,
                    "paper_mean": p_mean,
                    "paper_std": p_std,
                    "diverged": counts.get("diverged", 0),
                    "failed": counts.get("failed", 0),
                    "unsupported": counts.get("unsupported", 0),
                    "missing": counts.get("missing", 0),
                    "reason": reasons.iloc[0] if len(reasons) else "",
                    "not_reached": len(unreached) if metric == "rounds_to_target" else 0,
                    "rounds": int(cell["rounds"].max()) if cell["rounds"].notna().any() else None,
                }
                record["cell"] = cell_text(record, metric)
                record["paper"] = paper_text(p_mean, p_std, metric)
                records.append(record)
    return pd.DataFrame.from_records(records)


def cell_text(record: dict[str, Any], metric: str) -> str:
    n, mean, std = record["n"], record["mean"], record["std"]
    unreached = record.get("not_reached", 0)
    never = f"not reached in {record.get('rounds')} rounds"
    if n == 0 and unreached:
        return never if unreached == 1 else f"{never} ({unreached} runs)"
    if n == 0:
        if record["unsupported"]:
            return _unavailable_text(record["reason"])
        for status in ("diverged", "failed", "missing"):
            if record[status]:
                return "not run" if status == "missing" else status
        return ""
    text = fmt(mean, metric) + (f" ± {fmt(std, metric)}" if n > 1 else "")
    notes = [f"{record[s]} {s}" for s in ("diverged", "failed", "missing") if record[s]]
    if unreached:  # the mean is over the runs that reached the target
        notes.insert(0, f"{unreached} of {n + unreached} {never}")
    return text + (f" ({', '.join(notes)})" if notes else "")


def paper_text(mean: float, std: float, metric: str) -> str:
    if math.isnan(mean):
        return ""
    return fmt(mean, metric) + ("" if math.isnan(std) else f" ± {fmt(std, metric)}")


def _columns(summary: pd.DataFrame, table: TableConfig) -> list[tuple[str, str | None, str]]:
    """(header, setting JSON or None for row metrics, metric) in the paper's order."""
    settings = list(dict.fromkeys(summary["setting_json"]))
    cols: list[tuple[str, str | None, str]] = []
    for setting_json in settings:
        label = setting_label(json.loads(setting_json))
        for metric in table.metrics:
            if metric not in ROW_METRICS:
                header = f"{label}: {metric}" if len(settings) > 1 or label != "all" else metric
                cols.append((header, setting_json, metric))
    for metric in table.metrics:
        if metric in ROW_METRICS:
            cols.append((metric, None, metric))
    return cols


def _with_setting_json(summary: pd.DataFrame, table: TableConfig) -> pd.DataFrame:
    keys = list(table.grid)
    summary = summary.copy()
    summary["setting_json"] = [
        json.dumps({k: row[k] for k in keys}, sort_keys=False) for _, row in summary.iterrows()
    ]
    return summary


def layout(summary: pd.DataFrame, table: TableConfig) -> tuple[pd.DataFrame, dict[str, str]]:
    """The paper's layout: one row per method; per column and metric, our cell and the paper's.
    Also returns, per header, the methods whose mean is best (bold; ties share it)."""
    summary = _with_setting_json(summary, table)
    columns = _columns(summary, table)
    methods = list(dict.fromkeys(summary["method"]))
    data: dict[str, list[str]] = {"method": methods}
    best: dict[str, set[str]] = {}
    for header, setting_json, metric in columns:
        ours, theirs, means = [], [], []
        for method in methods:
            rows = summary[(summary["method"] == method) & (summary["metric"] == metric)]
            if setting_json is not None:
                rows = rows[rows["setting_json"] == setting_json]
            row = rows.iloc[0] if len(rows) else None
            ours.append("" if row is None else row["cell"])
            theirs.append("" if row is None else row["paper"])
            means.append(math.nan if row is None else row["mean"])
        data[header] = ours
        data[f"{header} (paper)"] = theirs
        valid = [(m, method) for m, method in zip(means, methods, strict=True) if not math.isnan(m)]
        if len(valid) > 1:
            pick = min if metric in LOWER_IS_BETTER else max
            top = pick(m for m, _ in valid)
            winners = {method for m, method in valid if m == top}
            if len(winners) < len(valid):  # ties share the bold; all equal means no winner
                best[header] = winners
    return pd.DataFrame(data), best


def to_markdown(wide: pd.DataFrame, best: dict[str, set[str]], title: str) -> str:
    headers = list(wide.columns)
    lines = [f"# {title}", "", "| " + " | ".join(headers) + " |"]
    lines.append("|" + "|".join(["---"] * len(headers)) + "|")
    for _, row in wide.iterrows():
        cells = []
        for header in headers:
            text = str(row[header])
            if row["method"] in best.get(header, ()) and text:
                text = f"**{text}**"
            cells.append(text)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _tex_escape(text: str) -> str:
    for a, b in (
        ("\\", r"\textbackslash{}"),
        ("&", r"\&"),
        ("%", r"\%"),
        ("_", r"\_"),
        ("#", r"\#"),
    ):
        text = text.replace(a, b)
    return text.replace("±", r"$\pm$")


def to_latex(wide: pd.DataFrame, best: dict[str, set[str]], title: str) -> str:
    """booktabs; our cells only (the paper's numbers are in table.md / table.csv); best in bold."""
    headers = [h for h in wide.columns if h != "method" and not h.endswith(" (paper)")]
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{_tex_escape(title)}}}",
        r"\begin{tabular}{l" + "c" * len(headers) + "}",
        r"\toprule",
        "Method & " + " & ".join(_tex_escape(h) for h in headers) + r" \\",
        r"\midrule",
    ]
    for _, row in wide.iterrows():
        cells = [_tex_escape(str(row["method"]))]
        for header in headers:
            text = _tex_escape(str(row[header]))
            if row["method"] in best.get(header, ()) and text:
                text = rf"\textbf{{{text}}}"
            cells.append(text)
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def to_rich(wide: pd.DataFrame, best: dict[str, set[str]], title: str) -> Table:
    out = Table(title=title)
    headers = [h for h in wide.columns if not h.endswith(" (paper)")]
    for header in headers:
        out.add_column(header, overflow="fold")
    for _, row in wide.iterrows():
        cells = []
        for header in headers:
            text = str(row[header])
            if header != "method":
                paper = str(row[f"{header} (paper)"])
                if row["method"] in best.get(header, ()) and text:
                    text = f"[bold]{text}[/bold]"
                if paper:
                    text += f" [dim]({paper.split(' ± ')[0]})[/dim]"
            cells.append(text)
        out.add_row(*cells)
    return out
