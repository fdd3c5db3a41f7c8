"""mean ± std over seeds: the long summary.csv, and the paper-layout table.csv / table.md /
table.tex, plus the rich tables printed at the end of a sweep.

Every rendering says what ran (the caption / heading built by fedbench.report.build from the
resolved run configs) and names each column by the values that ran in it. The paper's numbers
are never inline: they form a separate block labelled with the paper's setting, with a one-line
caveat when what ran differs from it. Bold marks the best mean of a column as shown (rounded),
so rows that print the same number share it; "≈" marks rows within noise of the best (a paired
t-test over seeds where the rows ran the same seeds, else Welch's, Holm-corrected over the
report's tests: fedbench.report.significance).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd
from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from fedbench.personal.summary import (
    COLUMN_LABELS,
    COLUMNS,
    PERSONAL_METRICS,
    STAT_LABELS,
    STATS,
)
from fedbench.report.collect import LOWER_IS_BETTER, MISSING, NOT_RUN
from fedbench.report.paper import paper_value
from fedbench.report.privacy_cells import NO_DP, cell_privacy, epsilon_text
from fedbench.report.significance import (
    CORRECTION,
    LEVEL,
    MIN_SEEDS,
    TEST_NAME,
    TEST_NAMES,
    holm,
    mean_ci,
    tie_with_best,
)
from fedbench.runner.table_config import DIAGNOSTIC_METRICS, ROW_METRICS, TableConfig

DIGITS = {
    "test_acc": 2,
    "best_test_acc": 2,
    "train_loss": 3,
    "test_loss": 3,
    "comm": 2,
    "wall_s": 1,
    "rounds_to_target": 0,
    "epsilon": 2,
    **dict.fromkeys(PERSONAL_METRICS, 2),
}
#: Metric subheaders (markdown / terminal; LaTeX escapes them).
METRIC_LABELS = {
    "test_acc": "acc (%)",
    "best_test_acc": "best acc (%)",
    "train_loss": "train loss",
    "test_loss": "test loss",
    "comm": "comm (×d)",
    "comm_up": "up (floats)",
    "comm_down": "down (floats)",
    "wall_s": "wall (s)",
    "rounds_to_target": "rounds to target",
    "client_drift": "client drift",
    "relative_drift": "drift / |mean update|^2",
    "v_spread": "v spread",
    "local_step_ratio": "step RMS / lr",
    "epsilon": "ε (δ, accounting)",
    **{
        f"{column}_{stat}": f"{COLUMN_LABELS[column]} {STAT_LABELS[stat]} (%)"
        for column in COLUMNS
        for stat in STATS
    },
}
#: Measurements that explain or bound a result rather than score it: no best row, no test.
UNRANKED_METRICS = (*DIAGNOSTIC_METRICS, "epsilon")
TIE_MARK = "≈"
#: The terminal's mark of the best cells, beside bold (which a log file does not keep).
BEST_MARK = "★"


def fmt(value: float, metric: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if metric in ("comm_up", "comm_down", *DIAGNOSTIC_METRICS):
        return f"{value:.3g}"
    return f"{value:.{DIGITS.get(metric, 3)}f}"


def _unavailable_text(reason: str | None) -> str:
    """'blocks: hessian is not available ...' -> 'needs blocks: hessian'."""
    if (reason or "").startswith("not implemented"):
        return reason or ""
    match = re.match(r"\s*(\S+: \S+) is not (available|implemented|supported)", reason or "")
    if match:
        return f"needs {match.group(1)}"
    return f"unsupported: {(reason or '').split(';')[0]}"


# ---------------------------------------------------------------------------------------------
# The long summary: one row per (method, column, metric)


def summarise(runs: pd.DataFrame, table: TableConfig, ci: bool = False) -> pd.DataFrame:
    """Long format: method, setting columns, metric, mean, std (ddof 1), n, ci95_low, ci95_high
    (the 95 % t interval of the mean), paper_mean, paper_std, the run counts by status, then best
    (bold: the best mean as shown), test (paired | welch | exact), p_vs_best, p_holm and tie (the test
    against the column's best row, Holm-corrected over the report; empty when not tested), and
    the internal columns setting_json, values, seeds, cell and paper (dropped from summary.csv)."""
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
            privacy = cell_privacy(cell)
            missing = cell[cell["status"] == MISSING]
            threads = thread_counts(cell[cell["status"] == "completed"]["threads"])
            for metric in table.metrics:
                ok = cell[(cell["status"] == "completed") & cell[metric].notna()][metric]
                n = len(ok)
                low, high = mean_ci([float(v) for v in ok])
                p_mean, p_std = paper_value(table.paper, method, setting, metric)
                reasons = cell[cell["status"] == "unsupported"]["reason"]
                # rounds_to_target: completed runs that never reached the target (no value).
                unreached = cell[(cell["status"] == "completed") & cell[metric].isna()]
                record = {
                    "method": method,
                    **setting,
                    "metric": metric,
                    "mean": float(ok.mean()) if n else math.nan,
                    "std": float(ok.std(ddof=1)) if n > 1 else math.nan,
                    "n": n,
                    "ci95_low": low,
                    "ci95_high": high,
                    "paper_mean": p_mean,
                    "paper_std": p_std,
                    **privacy,
                    "diverged": counts.get("diverged", 0),
                    "failed": counts.get("failed", 0),
                    "unsupported": counts.get("unsupported", 0),
                    "missing": counts.get(MISSING, 0),
                    # which seeds have no result (collect.read_run: why)
                    "missing_seeds": seed_list(missing["seed"]),
                    "reason": reasons.iloc[0] if len(reasons) else "",
                    "not_reached": len(unreached) if metric == "rounds_to_target" else 0,
                    "rounds": int(cell["rounds"].max()) if cell["rounds"].notna().any() else None,
                    # the torch thread counts its completed CPU runs trained at: '1', '1/2'
                    "threads": threads,
                    "setting_json": setting_json,
                    "values": [float(v) for v in ok],
                    "seeds": [int(v) for v in cell.loc[ok.index, "seed"]],
                    "not_run": int((missing["reason"] == NOT_RUN).sum()),
                }
                record["paper"] = paper_text(p_mean, p_std, metric)
                records.append(record)
    # "(1 seed)" marks the cells of one seed where other cells have more; where every cell has
    # one seed, the legend says so once.
    counts = {r["n"] for r in records if r["n"] > 0}
    mixed = 1 in counts and len(counts) > 1
    for record in records:
        record["cell"] = cell_text(record, record["metric"], one_seed_note=mixed, ci=ci)
        if record["metric"] == "epsilon" and record["n"]:
            record["cell"] = epsilon_text(record)  # the worst seed's, with δ and the status
        elif record["metric"] == "epsilon" and not record["cell"]:
            record["cell"] = NO_DP  # its runs completed without privacy
    summary = pd.DataFrame.from_records(records)
    return _mark_best(summary) if len(summary) else summary


#: Joins a cell's thread counts; more than one ('1/2') is a cell of mixed thread counts.
THREADS_JOIN = "/"


def thread_counts(values: Any) -> str:
    """'1', or '1/2' where the runs trained at several torch thread counts ('' when unknown: a
    GPU run, an older summary)."""
    counts = sorted({int(v) for v in values if v is not None and not pd.isna(v)})
    return THREADS_JOIN.join(map(str, counts))


def mixed_threads(record: dict[str, Any]) -> bool:
    """Whether a summary record's completed runs trained at several thread counts."""
    return THREADS_JOIN in str(record.get("threads") or "")


def seed_list(seeds: Any) -> str:
    """'2' or '0, 3': seeds in order ('' for none)."""
    return ", ".join(str(int(s)) for s in sorted(seeds))


def _missing_note(record: dict[str, Any]) -> str:
    """'seed 2 missing', 'seeds 0, 3 missing'."""
    seeds = record.get("missing_seeds") or ""
    many = "," in seeds
    return f"seed{'s' * many} {seeds} missing" if seeds else f"{record['missing']} missing"


def _column_of(summary: pd.DataFrame, setting_json: str, metric: str) -> pd.DataFrame:
    rows = summary[summary["metric"] == metric]
    if metric in ROW_METRICS:  # reported once per row: the first column's value
        return rows.drop_duplicates("method")
    return rows[rows["setting_json"] == setting_json]


def _mark_best(summary: pd.DataFrame) -> pd.DataFrame:
    """best: the rows whose mean, rounded as shown, is the column's best (ties share it; a column
    where every row shows the same number has none, and so has a column with a cell of one
    seed, whose lead says nothing about noise). test / p_vs_best: each row against the row with
    the best unrounded mean (paired by seed where the two ran the same seeds, else Welch's);
    p_holm: p_vs_best Holm-corrected over every test of the summary; tie: p_holm >= LEVEL."""
    summary = summary.copy()
    summary["best"] = False
    summary["test"] = ""
    summary["p_vs_best"] = math.nan
    summary["p_holm"] = math.nan
    summary["tie"] = None
    for (setting_json, metric), _ in summary.groupby(["setting_json", "metric"], sort=False):
        if metric in UNRANKED_METRICS:
            continue  # measurements that explain, not scores: no best row
        rows = _column_of(summary, setting_json, metric)
        rows = rows[rows["n"] > 0]
        if len(rows) < 2 or (rows["n"] < 2).any():
            continue
        lower = metric in LOWER_IS_BETTER
        shown = pd.Series([float(fmt(m, metric)) for m in rows["mean"]], index=rows.index)
        top = shown.min() if lower else shown.max()
        winners = shown.index[shown == top]
        if len(winners) == len(rows):
            continue  # every row shows the same number: no best, nothing to test against
        summary.loc[winners, "best"] = True
        leader = rows["mean"].idxmin() if lower else rows["mean"].idxmax()
        for index in rows.index:
            if index == leader:
                continue
            test = tie_with_best(
                rows.at[leader, "values"],
                rows.at[index, "values"],
                rows.at[leader, "seeds"],
                rows.at[index, "seeds"],
            )
            if test.tested:
                summary.at[index, "test"] = "exact" if test.noiseless else test.kind
                summary.at[index, "p_vs_best"] = test.p
    # Holm over the report's tests; an exact comparison (no noise) keeps its p of 0 or 1.
    tests = list(summary["test"].isin(list(TEST_NAMES)))
    raw = list(summary["p_vs_best"])
    adjusted = holm([p if t else math.nan for p, t in zip(raw, tests, strict=True)])
    summary["p_holm"] = adjusted
    for index, p_raw, p_holm, is_test in zip(summary.index, raw, adjusted, tests, strict=True):
        p = p_holm if is_test else p_raw
        if not math.isnan(p):
            summary.at[index, "tie"] = bool(p >= LEVEL)
    return summary


def cell_text(
    record: dict[str, Any], metric: str, one_seed_note: bool = False, ci: bool = False
) -> str:
    """'mean ± std' ('± std' only when the seeds differ: none for a deterministic metric such as
    comm), or why the cell is empty; failed / diverged / missing seeds are noted, and with
    one_seed_note a cell of one seed says '1 seed'. With `ci`, the 95 % interval of the mean
    follows the std: '91.00 ± 1.00 [88.52, 93.48]'."""
    n, mean, std = record["n"], record["mean"], record["std"]
    unreached = record.get("not_reached", 0)
    never = f"not reached in {record.get('rounds')} rounds"
    if n == 0:
        return _empty_cell_text(record, never, unreached)
    text = fmt(mean, metric)
    if n > 1 and not (isinstance(std, float) and (math.isnan(std) or std == 0.0)):
        text += f" ± {fmt(std, metric)}"
        if ci and not math.isnan(record.get("ci95_low", math.nan)):
            text += f" [{fmt(record['ci95_low'], metric)}, {fmt(record['ci95_high'], metric)}]"
    notes = [f"{record[s]} {s}" for s in ("diverged", "failed") if record[s]]
    if record[MISSING]:
        notes.append(_missing_note(record))
    if mixed_threads(record):  # its seeds are not alike to the last digit
        notes.append(f"mixed threads {record['threads']}")
    if one_seed_note and n == 1:
        notes.insert(0, "1 seed")
    if unreached:  # the mean is over the runs that reached the target
        notes.insert(0, f"{unreached} of {n + unreached} {never}")
    return text + (f" ({', '.join(notes)})" if notes else "")


def _empty_cell_text(record: dict[str, Any], never: str, unreached: int) -> str:
    """Why a cell has no value: the target not reached, unsupported, diverged, failed, not run,
    or which seeds have no result ('seed 2 missing': collect.read_run)."""
    if unreached:
        return never if unreached == 1 else f"{never} ({unreached} runs)"
    if record["unsupported"]:
        return _unavailable_text(record["reason"])
    for status in ("diverged", "failed"):
        if record[status]:
            return status
    if record[MISSING]:
        return "not run" if record.get("not_run") == record[MISSING] else _missing_note(record)
    return ""


def paper_text(mean: float, std: float, metric: str) -> str:
    if math.isnan(mean):
        return ""
    return fmt(mean, metric) + ("" if math.isnan(std) or std == 0 else f" ± {fmt(std, metric)}")


# ---------------------------------------------------------------------------------------------
# The view every rendering shares


@dataclass
class HeaderGroup:
    """A header group: one column of the table (a setting) with its metrics, or the row
    metrics (setting_json None, label '')."""

    setting_json: str | None
    label: str  # what ran, e.g. "CNN / Dir-0.6"
    paper_label: str  # the paper's, e.g. "ResNet-18 / Dir-0.6"
    metrics: list[str]


@dataclass
class Cell:
    text: str
    best: bool = False
    tie: bool | None = None
    #: The cell where a footnote says the rest (table.tex): an epsilon cell's value without its
    #: delta and accounting status; '' where the text is the cell.
    short: str = ""


@dataclass
class View:
    title: str
    #: What ran, one sentence from the resolved run configs.
    ran: str
    #: Preset, seeds, the reported statistic and every --set.
    details: str
    groups: list[HeaderGroup]
    methods: list[str]
    cells: dict[tuple[str, str | None, str], Cell]
    paper: dict[tuple[str, str | None, str], str] = field(default_factory=dict)
    #: "paper (CIFAR-100, ResNet-18 / ViT-Tiny)"; empty when the table has no paper numbers.
    paper_label: str = ""
    #: One line: where what ran differs from the paper's setting (empty: the same setting).
    paper_caveat: str = ""
    #: Whether any cell was tested (>= MIN_SEEDS seeds): the legend says so either way.
    tested: bool = False
    #: The tests made, by kind ('paired', 'welch') -> how many (the family Holm corrects over).
    tests: dict[str, int] = field(default_factory=dict)
    #: Whether some cell has >= MIN_SEEDS seeds (when none was tested all the same, it is because
    #: no column has a single best row to test against).
    enough_seeds: bool = False
    #: The table config's `note:` (e.g. why our numbers are expected to differ from the paper's).
    note: str = ""
    #: "all" when every cell with a value has one seed, "some" when some do, "" when none.
    one_seed: str = ""
    #: table.csv's header prefixes (ours, the paper's), e.g. ("digits", "CIFAR-100") where the
    #: dataset that ran is not the paper's; empty when it is.
    csv_prefix: tuple[str, str] = ("", "")
    #: Each row's settings that differ between rows (algorithm and its hyperparameters, where
    #: they differ from the algorithm's defaults): 'FedAvg: fedavg, lr 0.05; ...'.
    rows: str = ""
    #: With the table's `column_labels:`, what each named column ran: 'Dir-0.1: Dir-0.1; ...'.
    columns: str = ""
    #: Whether cells show the 95 % interval of the mean ('mean ± std [low, high]').
    ci: bool = False
    #: Legend lines of a table with private rows: what ε is, each accounting status and why.
    privacy: list[str] = field(default_factory=list)
    #: The thread counts of the cells whose runs trained at several ('1/2'): a legend line.
    mixed_threads: list[str] = field(default_factory=list)
    #: Each row's privacy as curves.png's caption gives it: 'DP-FedAvg (ε 3.12, δ 1e-05, exact)'.
    method_labels: dict[str, str] = field(default_factory=dict)
    #: table.tex's footnote of a table with private rows: what ε is, δ and the accounting
    #: status, once (privacy_cells.privacy_note); '' without DP.
    privacy_note: str = ""

    def ran_lines(self) -> list[tuple[str, str]]:
        """(name, text) of what ran, the rows' and the columns' settings, each when present."""
        named = [("What ran", self.ran), ("Rows", self.rows), ("Columns", self.columns)]
        return [(name, text) for name, text in named if text]

    def tests_text(self) -> str:
        """'paired t-test over seeds (4 tests); Holm-corrected over the 4 tests of this report':
        which tests ran, and the correction over all of them (exact comparisons, without noise,
        are no tests)."""
        made = sum(self.tests.values())
        if not made:
            return "exact comparisons: every seed gives the same difference, no noise to test"
        kinds = ", ".join(
            f"{TEST_NAMES[k]} ({n} test{'s' * (n != 1)})" for k, n in self.tests.items() if n
        )
        return f"{kinds}; {CORRECTION} over the {made} test{'s' * (made != 1)} of this report"

    @property
    def has_paper(self) -> bool:
        return bool(self.paper_label) and any(self.paper.values())

    def short_legend(self, privacy: bool = True) -> str:
        """The legend in one sentence, for a caption (`privacy`: with the privacy legend)."""
        if self.one_seed == "all":
            text = "Values of 1 seed (no std, no bold)"
        else:
            text = "Mean ± std over seeds" + (" [95% CI]" if self.ci else "")
            text += "; bold: best as shown"
            if self.one_seed == "some":
                text += " (not in columns with a cell of 1 seed)"
        if self.tested:
            text += f"; ≈: within noise of the best ({self.tests_text()}, p ≥ {LEVEL})"
        if any(m == "comm" for g in self.groups for m in g.metrics):
            text += "; comm: uploads per client-round in units of d"
        lines = [*(self.privacy if privacy else []), *self.threads_lines()]
        return text + "." + "".join(f" {line}." for line in lines)

    def threads_lines(self) -> list[str]:
        """The legend line of a table with a cell whose runs trained at several thread counts."""
        if not self.mixed_threads:
            return []
        counts = ", ".join(self.mixed_threads)
        return [
            f"mixed threads {counts}: the cell's runs trained on the CPU at different torch "
            "thread counts (summary.json torch_threads); training's sums are split over the "
            "threads, so its seeds differ in their last digits from runs at one count (run them "
            "again with runtime.threads set to one count to compare them exactly)"
        ]

    def legend(self, best_mark: str = "") -> list[str]:
        """The legend lines; best_mark: the sign that also marks the best cells (the terminal's
        bold is lost in a log file)."""
        best = f"bold {best_mark}" if best_mark else "bold"
        skipped = "failed, diverged or missing seeds are noted and left out of the mean"
        if self.one_seed == "all":
            lines = [
                f"cells: the value of 1 seed (n = 1: no ±); {skipped}",
                "no bold: with 1 seed per cell no row is shown as best (run 3 or more seeds, "
                "--seeds 3)",
            ]
        else:
            one = " ('1 seed' where n = 1: no ±)" if self.one_seed == "some" else ""
            lines = [
                f"cells: mean ± sample std (ddof 1) over seeds{one}; no ± where every seed gives "
                f"the same value; {skipped}",
                f"{best}: the best mean of its column as shown (rows showing the same number "
                "share it)"
                + ("; none in a column with a cell of 1 seed" if self.one_seed == "some" else ""),
            ]
        if self.tested:
            lines.append(
                f"{TIE_MARK}: within noise of the column's best row ({self.tests_text()}; "
                f"two-sided p >= {LEVEL}); unmarked rows differ from the best (p < {LEVEL})"
            )
        elif self.enough_seeds:
            lines.append(
                "no significance marks: no column has a single best row to test against (its "
                "rows show the same number)"
            )
        else:
            lines.append(
                f"no significance marks: the test ({TEST_NAME}) needs >= {MIN_SEEDS} seeds per cell"
            )
        if self.ci:
            lines.append(
                "[low, high]: the 95 % confidence interval of the mean (Student t, n - 1 degrees "
                "of freedom: mean ± t s / √n)"
            )
        if any(m == "comm" for g in self.groups for m in g.metrics):
            lines.append("comm: floats uploaded per client and round, in units of d (model size)")
        return lines + self.privacy + self.threads_lines()


def build_view(
    summary: pd.DataFrame,
    table: TableConfig,
    labels: dict[str, tuple[str, str]],
    **texts: Any,
) -> View:
    """labels: setting JSON -> (what-ran label, paper label); texts: View's text fields."""
    groups: list[HeaderGroup] = []
    settings = list(dict.fromkeys(summary["setting_json"])) if len(summary) else []
    column_metrics = [m for m in table.metrics if m not in ROW_METRICS]
    row_metrics = [m for m in table.metrics if m in ROW_METRICS]
    if column_metrics:
        for setting_json in settings:
            label, paper_label = labels.get(setting_json, ("", ""))
            groups.append(HeaderGroup(setting_json, label, paper_label, column_metrics))
    if row_metrics:
        groups.append(HeaderGroup(None, "", "", row_metrics))
    methods = list(dict.fromkeys(summary["method"])) if len(summary) else []
    cells: dict[tuple[str, str | None, str], Cell] = {}
    paper: dict[tuple[str, str | None, str], str] = {}
    tested = False
    for group in groups:
        for metric in group.metrics:
            key_json = group.setting_json or (settings[0] if settings else "")
            rows = _column_of(summary, key_json, metric)
            for _, row in rows.iterrows():
                tie = None if row["tie"] is None or pd.isna(row["tie"]) else bool(row["tie"])
                tested |= tie is not None
                key = (row["method"], group.setting_json, metric)
                short = ""
                if metric == "epsilon":  # table.tex: the value; delta and status in a footnote
                    short = fmt(row["epsilon"], metric) if row["n"] else row["cell"]
                cells[key] = Cell(row["cell"], bool(row["best"]), tie, short)
                paper[key] = row["paper"]
    enough = bool(len(summary)) and bool((summary["n"] >= MIN_SEEDS).any())
    tests = {k: int((summary["test"] == k).sum()) for k in TEST_NAMES} if len(summary) else {}
    counts = set(summary["n"][summary["n"] > 0]) if len(summary) else set()
    one_seed = "" if 1 not in counts else "all" if counts == {1} else "some"
    threads = summary.get("threads", [])
    return View(
        mixed_threads=list(dict.fromkeys(str(t) for t in threads if THREADS_JOIN in str(t))),
        groups=groups,
        methods=methods,
        cells=cells,
        paper=paper,
        tested=tested,
        tests=tests,
        enough_seeds=enough,
        one_seed=one_seed,
        **texts,
    )


def _decorated(cell: Cell | None, bold: tuple[str, str], mark: str) -> str:
    if cell is None or not cell.text:
        return "" if cell is None else cell.text
    if cell.best:  # best as shown: a tie mark would say nothing more
        return f"{bold[0]}{cell.text}{bold[1]}"
    return cell.text + (mark if cell.tie else "")


def _rows(
    view: View,
    paper: bool,
    decorate: Callable[[Cell | None], str],
    escape: Callable[[str], str] = str,
) -> list[list[str]]:
    """The body of a rendered table: a row per method, its name then, per setting and metric,
    the paper's text (`paper`) or our cell as the format marks it (`decorate`); `escape` turns
    plain text into the format's."""
    rows = []
    for method in view.methods:
        cells = [escape(method)]
        for group in view.groups:
            for metric in group.metrics:
                key = (method, group.setting_json, metric)
                text = escape(view.paper.get(key, "")) if paper else decorate(view.cells.get(key))
                cells.append(text)
        rows.append(cells)
    return rows


def _header(group: HeaderGroup, metric: str, paper: bool = False) -> str:
    label = group.paper_label if paper else group.label
    sub = METRIC_LABELS.get(metric, metric)
    return f"{label}: {sub}" if label else sub


def _csv_header(group: HeaderGroup, metric: str, prefix: str, paper: bool = False) -> str:
    """'digits / CNN / Dir-0.6: acc (%)': _header with the dataset in front where it differs."""
    label = " / ".join(p for p in (prefix, group.paper_label if paper else group.label) if p)
    sub = METRIC_LABELS.get(metric, metric)
    return f"{label}: {sub}" if label else sub


def to_wide(view: View) -> pd.DataFrame:
    """table.csv: a row per method; our cells (≈ marks kept), then the paper's columns, each
    header prefixed `paper ` and named by the paper's setting; where that setting differs from
    what ran, `paper at paper setting ` (and the datasets lead the headers where they differ)."""
    ours_prefix, paper_prefix = view.csv_prefix
    data: dict[str, list[str]] = {"method": view.methods}
    for group in view.groups:
        for metric in group.metrics:
            data[_csv_header(group, metric, ours_prefix)] = [
                _decorated(
                    view.cells.get((m, group.setting_json, metric)), ("", ""), f" {TIE_MARK}"
                )
                for m in view.methods
            ]
    if view.has_paper:
        name = "paper at paper setting " if view.paper_caveat else "paper "
        for group in view.groups:
            for metric in group.metrics:
                data[name + _csv_header(group, metric, paper_prefix, paper=True)] = [
                    view.paper.get((m, group.setting_json, metric), "") for m in view.methods
                ]
    return pd.DataFrame(data)


# ---------------------------------------------------------------------------------------------
# Markdown


def md_cell(text: str) -> str:
    """Text in a markdown table cell: a `|` in it would end the cell (labels are otherwise
    plain text: fedbench.labels refuses what markdown cannot hold)."""
    return text.replace("|", "\\|")


def _md_table(view: View, paper: bool) -> list[str]:
    headers = ["method"] + [_header(g, m, paper) for g in view.groups for m in g.metrics]
    lines = [_md_row(headers), "|" + "|".join(["---"] * len(headers)) + "|"]
    for cells in _rows(view, paper, lambda cell: _decorated(cell, ("**", "**"), f" {TIE_MARK}")):
        lines.append(_md_row(cells))
    return lines


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(md_cell(c) for c in cells) + " |"


def to_markdown(view: View) -> str:
    lines = [f"# {view.title}", ""]
    for name, text in view.ran_lines():
        lines += [f"**{name}:** {text}.", ""]
    lines += [f"{view.details}.", ""]
    lines += _md_table(view, paper=False)
    lines += ["", *(f"- {line}" for line in view.legend())]
    if view.note:
        lines += ["", view.note]
    if view.has_paper:
        lines += ["", f"## {view.paper_label}", ""]
        if view.paper_caveat:
            lines += [f"> {view.paper_caveat}", ""]
        lines += _md_table(view, paper=True)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# LaTeX (booktabs)

_TEX = {
    "--": "-{}-",  # not an en dash: `--set` stays `--set`
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "_": r"\_",
    "#": r"\#",
    "$": r"\$",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "×": r"$\times$",
    "≈": r"$\approx$",
    "α": r"$\alpha$",
    "β": r"$\beta$",
    "λ": r"$\lambda$",
    "σ": r"$\sigma$",
    "ε": r"$\varepsilon$",
    "δ": r"$\delta$",
    "≥": r"$\geq$",
    "–": "--",
}
_TEX_RE = re.compile("|".join(re.escape(k) for k in _TEX))

TEX_METRICS = {
    "test_acc": r"Acc.\ (\%)",
    "train_loss": "Train loss",
    "test_loss": "Test loss",
    "comm": "Comm",
    "comm_up": "Up",
    "comm_down": "Down",
    "wall_s": "Wall (s)",
    "client_drift": "Client drift",
    "relative_drift": "Drift / $\\|\\bar\\Delta\\|^2$",
    "v_spread": "$v$ spread",
    "local_step_ratio": "Step RMS / lr",
    "epsilon": r"$\varepsilon$",  # delta and the accounting status: in the note under the table
}


def tex_escape(text: str) -> str:
    """Plain text (with ±, ≈ and Greek letters) as pdflatex-safe LaTeX."""
    return _TEX_RE.sub(lambda m: _TEX[m.group(0)], text)


def _tex_cell(cell: Cell | None) -> str:
    """A LaTeX cell: the text escaped (its short form where it has one), then marked as in
    every other format (`_decorated`)."""
    if cell is None:
        return _decorated(None, (r"\textbf{", "}"), r"$^{\approx}$")
    escaped = replace(cell, text=tex_escape(cell.short or cell.text))
    return _decorated(escaped, (r"\textbf{", "}"), r"$^{\approx}$")


#: The mark of the header that table.tex's privacy footnote explains.
TEX_PRIVACY_MARK = r"$^\dagger$"


def _shared_epsilon(view: View, group: HeaderGroup) -> str:
    """The epsilon every row of a column spent, as shown ('2.00'), when they all agree (it then
    goes into the column's header instead of a column of its own); '' otherwise."""
    if "epsilon" not in group.metrics or group.setting_json is None:
        return ""
    cells = [view.cells.get((m, group.setting_json, "epsilon")) for m in view.methods]
    shown = {c.short for c in cells if c is not None and c.short}
    numeric = all(c is not None and c.short and c.text != c.short for c in cells)
    return next(iter(shown)) if numeric and len(shown) == 1 else ""


def _tex_groups(view: View) -> list[tuple[HeaderGroup, str]]:
    """The header groups as table.tex shows them: a column whose rows all spent the same
    epsilon loses its epsilon sub-column, and its header says the value (the second item)."""
    out = []
    for group in view.groups:
        shared = _shared_epsilon(view, group)
        if shared and len(group.metrics) > 1:
            group = replace(group, metrics=[m for m in group.metrics if m != "epsilon"])
        else:
            shared = ""
        out.append((group, shared))
    return out


def _tex_group_label(group: HeaderGroup, shared: str, paper: bool) -> str:
    label = tex_escape(group.paper_label if paper else group.label)
    if not shared or paper:
        return label
    note = rf"$\varepsilon$ {shared}{TEX_PRIVACY_MARK}"
    return f"{label} ({note})" if label else note


def _tex_tabular(view: View, paper: bool) -> list[str]:
    """One booktabs tabular: a \\multicolumn group per setting with metric subheaders, one line
    per row."""
    groups = _tex_groups(view)
    ncols = sum(len(g.metrics) for g, _ in groups)
    lines = [r"\begin{tabular}{l" + "c" * ncols + "}", r"\toprule"]
    if any(g.label or shared for g, shared in groups):
        tops, rules, start = [""], [], 2
        for group, shared in groups:
            width = len(group.metrics)
            label = _tex_group_label(group, shared, paper)
            tops.append(rf"\multicolumn{{{width}}}{{c}}{{{label}}}")
            if label:
                rules.append(rf"\cmidrule(lr){{{start}-{start + width - 1}}}")
            start += width
        lines.append(" & ".join(tops) + r" \\")
        lines.append(" ".join(rules))
    subs = [
        TEX_METRICS.get(m, tex_escape(m)) + (TEX_PRIVACY_MARK if m == "epsilon" else "")
        for g, _ in groups
        for m in g.metrics
    ]
    lines.append("Method & " + " & ".join(subs) + r" \\")
    lines.append(r"\midrule")
    shown = replace(view, groups=[g for g, _ in groups])
    for cells in _rows(shown, paper, _tex_cell, tex_escape):
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return lines


def _tex_caption(view: View) -> str:
    """One sentence: the table's title and what its cells are."""
    cells = "values of 1 seed" if view.one_seed == "all" else "mean ± std over seeds"
    return f"{view.title}: {cells}."


def _tex_note(view: View, paper_numbers: bool) -> str:
    """The \\footnotesize note under the table: the privacy footnote, what ran (setting, preset,
    seeds, --set, rows, columns), the legend and the paper's caveat (the table's `note:`, often
    a paragraph, stays in table.md)."""
    parts = []
    if view.privacy_note:
        parts.append(f"{TEX_PRIVACY_MARK}{tex_escape(view.privacy_note)}.")
    more = "".join(f" {name}: {text}." for name, text in view.ran_lines()[1:])
    text = f"What ran: {view.ran}; {view.details}.{more} {view.short_legend(privacy=False)}"
    if view.has_paper and paper_numbers:
        text += f" Below: {view.paper_label}, as reported. " + (
            view.paper_caveat or "The same setting as above."
        )
    parts.append(tex_escape(text))
    return " ".join(parts)


def to_latex(view: View, label: str, paper_numbers: bool = False) -> str:
    """table.tex: booktabs (\\usepackage{booktabs}), one \\multicolumn group per setting with
    metric subheaders and one source line per row; a one-sentence caption, and under the table
    a \\footnotesize note with the setting (what ran), the legend and, for private rows, what
    epsilon is with delta and the accounting status (once: the epsilon cells hold the value,
    or the header does where a column's rows share it). With paper_numbers the paper's
    numbers follow as a second, labelled tabular (never inline with ours), and the note
    carries the caveat when the paper's setting differs. No package beyond booktabs (and
    graphicx for a table of more than five columns, scaled to the text width)."""
    blocks = ["\n".join(_tex_tabular(view, paper=False))]
    if view.has_paper and paper_numbers:
        blocks.append(rf"\textit{{{tex_escape(view.paper_label)}}}")
        blocks.append("\n".join(_tex_tabular(view, paper=True)))
    body = blocks[0]
    if len(blocks) > 1:  # stacked in a one-column tabular, so that \resizebox scales them all
        body = "\\begin{tabular}{@{}c@{}}\n" + " \\\\[0.5em]\n".join(blocks) + "\n\\end{tabular}"
    wide = sum(len(g.metrics) for g, _ in _tex_groups(view)) > 5
    if wide:  # many columns: fit the text width
        body = "\\resizebox{\\linewidth}{!}{%\n" + body + "}"
    packages = "booktabs, graphicx" if wide else "booktabs"
    lines = [
        f"% fedbench report; needs \\usepackage{{{packages}}} (compiles with the article class)",
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{tex_escape(_tex_caption(view))}}}",
        rf"\label{{tab:{label}}}",
        r"\small",
        r"\setlength{\tabcolsep}{4pt}",
        body,
        r"\par\smallskip",
        rf"{{\footnotesize\raggedright {_tex_note(view, paper_numbers)}\par}}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Terminal (rich)


def _rich_table(view: View, paper: bool) -> Table:
    title = view.paper_label if paper else view.title
    bold = ("[bold]", f" {BEST_MARK}[/bold]")
    rows = _rows(view, paper, lambda cell: _decorated(cell, bold, f" {TIE_MARK}"))
    out = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    out.add_column("method", no_wrap=True, min_width=max(map(len, view.methods), default=6))
    index = 1
    for group in view.groups:
        label = group.paper_label if paper else group.label
        for metric in group.metrics:
            # A number split over two lines misreads: cells never wrap, headers are stacked
            # one part per line ("CNN", "Dir-0.6", "acc (%)") and the column fits both.
            header = (
                [*label.split(" / "), METRIC_LABELS.get(metric, metric)]
                if label
                else [METRIC_LABELS.get(metric, metric)]
            )
            width = max((Text.from_markup(r[index]).cell_len for r in rows), default=0)
            width = max(width, *(Text(h).cell_len for h in header))
            out.add_column("\n".join(header), min_width=width, no_wrap=True)
            index += 1
    for cells in rows:
        out.add_row(*cells)
    return out


def to_rich(view: View) -> Group:
    """What ran, our table with its legend, then the paper's block (labelled, with its caveat)."""
    parts: list[Any] = [
        *(
            Text(f"{name.lower()}: {text}", style="bold" if name == "What ran" else "")
            for name, text in view.ran_lines()
        ),
        Text(view.details),
        _rich_table(view, paper=False),
        Text("\n".join(f"  {line}" for line in view.legend(BEST_MARK)), style="dim"),
    ]
    if view.note:
        parts.append(Text(f"  {view.note}"))
    if view.has_paper:
        parts.append(_rich_table(view, paper=True))
        if view.paper_caveat:
            parts.append(Text(f"  {view.paper_caveat}", style="yellow"))
    return Group(*parts)
