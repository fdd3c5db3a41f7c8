"""`fedbench compare`: is one row better than another beyond seed noise?

Each side is a row of a table folder, `FOLDER:ROW` (ROW: the row's label or a unique prefix of
it, e.g. `A1` for "A1: w/o v_bar"), so that rows of one report, or the same row in two reports
(the paper's learning rate and a tuned one), can be set against each other. In every column the
two folders share, the per-seed values of the metric (as the report computes them) are compared
with the reports' test (fedbench.report.significance): a paired t-test over the seeds where both
sides ran the same seeds, else Welch's t-test; two-sided, with at least 3 seeds a side, and the
p-values of one `compare` Holm-corrected over all its tests (a verdict is made at corrected
p < 0.05). Each difference comes with its 95 % confidence interval.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.table import Table

from fedbench.errors import FedbenchError
from fedbench.report.collect import (
    PLAN_FILE,
    collect,
    plan_table,
    read_plan,
    run_configs,
    with_metrics,
)
from fedbench.report.ran import column_label, describe, facts
from fedbench.report.sides import RanSetting, setting_differences, side_names
from fedbench.report.significance import (
    CORRECTION,
    LEVEL,
    MIN_SEEDS,
    TEST_NAMES,
    Test,
    difference_test,
    holm,
)
from fedbench.suggest import did_you_mean


@dataclass(frozen=True)
class Side:
    """One row of one table folder: its per-seed values by column (setting JSON), each column's
    label by what ran in it, and what ran in the row (preset named)."""

    spec: str
    folder: Path
    row: str
    values: dict[str, list[float]]
    #: setting JSON -> the seed of each value (paired tests match them).
    seeds: dict[str, list[int]] = field(default_factory=dict)
    #: setting JSON -> 'CNN for ResNet-18 / Dir-0.6' (the resolved values, and the table's
    #: column where a preset or --set replaced it).
    columns: dict[str, str] = field(default_factory=dict)
    #: 'preset quick; digits, model CNN ...; 3 rounds, K=10 local steps, B=32'.
    ran: str = ""
    #: What every run of the row shares (config fields, the sweep's preset and --set values):
    #: what `compare` sets against the other side's (sides.setting_differences).
    setting: RanSetting = field(default_factory=lambda: RanSetting({}))
    #: The folder as the output names it: its name, or as much of its path as tells it apart
    #: from the other sides' folders (`side_names`).
    name: str = ""

    @property
    def label(self) -> str:
        """`table1-quick:FedAvg`: the folder (`name`, else its name) and the row's full label."""
        return f"{self.name or self.folder.name}:{self.row}"


@dataclass(frozen=True)
class Comparison:
    a: Side
    b: Side
    column: dict[str, object]
    a_values: list[float]
    b_values: list[float]
    #: The test made: paired or Welch's, its raw p, the difference and its 95 % interval.
    test: Test
    #: test.p Holm-corrected over every test of the `compare` (NaN: not tested).
    p_holm: float = math.nan

    @property
    def p(self) -> float:
        """The raw (uncorrected) p-value."""
        return self.test.p

    @property
    def warning(self) -> str | None:
        """scipy's warning about this test, as one line (None: none)."""
        return self.test.warning

    @property
    def column_label(self) -> str:
        """The column by what ran in it: one label, or each side's where they ran differently."""
        key = json.dumps(self.column)
        a, b = self.a.columns.get(key, ""), self.b.columns.get(key, "")
        if a == b:
            return a or "-"
        return f"A: {a or '-'}; B: {b or '-'}"

    @property
    def tested(self) -> bool:
        return min(len(self.a_values), len(self.b_values)) >= MIN_SEEDS and self.test.tested

    @property
    def verdict(self) -> str:
        """'>' or '<' (A beyond noise of B, Holm-corrected), 'tie' or 'not tested (n < 3)'."""
        if not self.tested:
            return f"not tested (fewer than {MIN_SEEDS} seeds)"
        if self.p_holm >= LEVEL:
            return "tie"
        return ">" if _mean(self.a_values) > _mean(self.b_values) else "<"

    @property
    def p_text(self) -> str:
        """The p-value as printed: '-' where no test was made."""
        return f"{self.p:.3g}" if self.tested else "-"

    @property
    def p_holm_text(self) -> str:
        return f"{self.p_holm:.3g}" if self.tested else "-"

    @property
    def test_text(self) -> str:
        """'paired', 'Welch' or 'exact' (no noise: every seed's difference the same); '-' where
        no test was made."""
        if not self.tested:
            return "-"
        return "exact" if self.test.noiseless else {"welch": "Welch"}.get(self.test.kind, "paired")

    def difference_text(self, metric: str) -> str:
        """'+1.67 [-0.48, 3.81]': mean(A) - mean(B) and its 95 % interval (paired: of the
        seeds' differences; Welch's otherwise), '+1.67' alone with fewer than 2 seeds a side."""
        from fedbench.report.tables import fmt

        text = f"{self.test.diff:+.3g}"
        low, high = self.test.ci
        if math.isnan(low):
            return text
        return f"{text} [{fmt(low, metric)}, {fmt(high, metric)}]"


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


def split_side(spec: str) -> tuple[str, str, str]:
    """`FOLDER:ROW` at the ':' after which FOLDER is a table folder (a folder name and a row
    label may both hold ':'): the last such ':', else the last ':' (the error then names it)."""
    cuts = [i for i, c in enumerate(spec) if c == ":"]
    for i in reversed(cuts):
        if (Path(spec[:i]) / PLAN_FILE).is_file():
            return spec[:i], ":", spec[i + 1 :]
    return spec.rpartition(":") if cuts else (spec, "", "")


def read_side(spec: str, metric: str) -> Side:
    """`FOLDER:ROW` -> the row's completed per-seed values of `metric`, by column."""
    folder_text, sep, row = split_side(spec)
    if not sep or not row.strip() or not folder_text:
        raise FedbenchError(
            f"{spec!r}: give a side as FOLDER:ROW, e.g. results/table1-quick:FedAvg"
        )
    folder = Path(folder_text)
    plan = read_plan(folder)
    table = plan_table(plan)
    row = _match_row(spec, row.strip(), list(table.methods))
    table = with_metrics(table, [metric])
    runs, _ = collect(folder, table=table)
    mine = runs[runs["method"] == row] if len(runs) else runs
    _require_runs(folder, row, mine, runs)
    values: dict[str, list[float]] = {}
    seeds: dict[str, list[int]] = {}
    done = mine[mine["status"] == "completed"]
    for setting, seed, value in zip(done["setting"], done["seed"], done[metric], strict=True):
        values.setdefault(setting, [])
        seeds.setdefault(setting, [])
        if value is not None and not math.isnan(value):
            values[setting].append(float(value))
            seeds[setting].append(int(seed))
    values, seeds = _recorded(spec, row, metric, values, seeds)
    configs = run_configs(plan, folder.parent / "runs")
    by_column: dict[str, list[dict]] = {}
    for run in plan["runs"]:
        if run["method"] == row and run["run_id"] in configs:
            by_column.setdefault(json.dumps(run["setting"]), []).append(configs[run["run_id"]])
    keys = list(table.grid)
    columns = {s: column_label(keys, cfgs, json.loads(s)) for s, cfgs in by_column.items()}
    preset = f"preset {plan['preset']}" if plan.get("preset") else "no preset"
    ran = f"{preset}; {describe(facts(by_column))}" if by_column else preset
    setting = RanSetting.of(
        [c for cfgs in by_column.values() for c in cfgs],
        plan.get("preset"),
        plan.get("overrides") or [],
    )
    return Side(spec, folder, row, values, seeds, columns, ran, setting)


def _recorded(
    spec: str,
    row: str,
    metric: str,
    values: dict[str, list[float]],
    seeds: dict[str, list[int]],
) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    """The columns in which some completed run of the row recorded `metric`; none at all is a
    one-line error (epsilon, say, on a row trained without privacy), not a mean of nothing."""
    kept = [setting for setting, found in values.items() if found]
    if not kept:
        why = (
            " (only private runs record epsilon: this row ran without a privacy section)"
            if metric == "epsilon"
            else ""
        )
        raise FedbenchError(
            f"{spec}: no completed run of row {row!r} recorded {metric!r}{why}; compare a "
            "metric its runs record (e.g. --metric test_acc)"
        )
    return {s: values[s] for s in kept}, {s: seeds[s] for s in kept}


def _require_runs(folder: Path, row: str, mine, runs) -> None:  # noqa: ANN001 (frames)
    """A row without completed runs is a one-line error saying why (not in the sweep, or every
    run failed / is missing), not a comparison over no columns."""
    if mine.empty:
        ran = list(dict.fromkeys(runs["method"])) if len(runs) else []
        raise FedbenchError(
            f"no runs for row {row!r} in {folder}: the sweep did not include it (rows with runs: "
            f"{', '.join(ran) or 'none'}); run it with `fedbench run ... --methods '{row}'` "
            "and the same --out"
        )
    if not (mine["status"] == "completed").any():
        counts = mine["status"].value_counts()
        text = ", ".join(f"{n} {status}" for status, n in counts.items())
        raise FedbenchError(f"no completed runs for row {row!r} in {folder} ({text})")


def compare(specs: list[str], metric: str = "test_acc") -> list[Comparison]:
    """Every pair of sides, in every column both have values in; the p-values Holm-corrected
    over all of them."""
    if len(specs) < 2:
        raise FedbenchError("give at least two sides to compare, each FOLDER:ROW")
    sides = [read_side(spec, metric) for spec in specs]
    names = side_names([side.folder for side in sides])
    sides = [replace(side, name=names[side.folder]) for side in sides]
    found = []
    for a, b in itertools.combinations(sides, 2):
        shared = [s for s in a.values if s in b.values]
        if not shared:
            raise FedbenchError(
                f"{a.spec} and {b.spec} share no column: their runs' grid values differ"
            )
        for setting in shared:
            test = difference_test(
                a.values[setting], b.values[setting], a.seeds[setting], b.seeds[setting]
            )
            found.append(
                Comparison(a, b, json.loads(setting), a.values[setting], b.values[setting], test)
            )
    # Holm over the tests; an exact comparison (no noise: p 0 or 1) is no member of the family.
    adjusted = holm([c.test.family_p if c.tested else math.nan for c in found])
    return [
        replace(c, p_holm=c.p if c.tested and c.test.noiseless else p)
        for c, p in zip(found, adjusted, strict=True)
    ]


def _cell(values: list[float], metric: str) -> str:
    """'73.83 ± 5.39 (n=3)'; one seed has no spread: '22.22 (n=1)'."""
    from fedbench.report.tables import fmt

    if len(values) < 2:
        return f"{fmt(_mean(values), metric)} (n={len(values)})"
    return (
        f"{fmt(_mean(values), metric)} ± {fmt(statistics.stdev(values), metric)} (n={len(values)})"
    )


def render(found: list[Comparison], metric: str) -> list[Table | str]:
    """The terminal output: the table (p only where a test was made), the tests made and their
    correction, what ran in each side (preset named), and scipy's warnings as one line."""
    view = Table(title=f"{metric}: mean ± std over seeds; two-sided t-tests, {CORRECTION}")
    headers = ("A", "B", "column (what ran)", "A: mean ± std", "B: mean ± std")
    for name in (*headers, "A - B [95% CI]", "p (test)", "p Holm", "verdict"):
        view.add_column(name, overflow="fold")
    for c in found:
        view.add_row(
            c.a.label,
            c.b.label,
            c.column_label,
            _cell(c.a_values, metric),
            _cell(c.b_values, metric),
            c.difference_text(metric),
            f"{c.p_text} {c.test_text}" if c.tested else "-",
            c.p_holm_text,
            c.verdict,
        )
    lines: list[Table | str] = [view, tests_line(found)]
    sides = {c.a.label: c.a for c in found} | {c.b.label: c.b for c in found}
    by_ran: dict[str, list[str]] = {}
    for label, side in sides.items():
        by_ran.setdefault(side.ran, []).append(label)
    lines += [f"what ran in {' and '.join(labels)}: {ran}" for ran, labels in by_ran.items()]
    pairs = dict.fromkeys((c.a.label, c.b.label) for c in found)
    for a_label, b_label in pairs:
        differ = setting_differences(sides[a_label].setting, sides[b_label].setting)
        lines.append(
            f"{a_label} (A) vs {b_label} (B) differ in: {'; '.join(differ)}"
            if differ
            else f"{a_label} and {b_label} ran the same settings"
        )
    warned = [c for c in found if c.warning and c.tested]
    if warned:
        lines.append(
            f"note: scipy warned for {len(warned)} of {len(found)} tests ({warned[0].warning}): "
            "the seeds' values are nearly identical, so those p-values may be unreliable"
        )
    return lines


def tests_line(found: list[Comparison]) -> str:
    """Which tests were made and how they are corrected, in one line."""
    made = [c for c in found if c.tested and not c.test.noiseless]
    exact = sum(c.tested and c.test.noiseless for c in found)
    note = (
        f"; exact: {exact} comparison{'s' * (exact != 1)} without noise (every seed's "
        "difference the same: p 0 or 1, not corrected)"
        if exact
        else ""
    )
    if not made:
        return f"no test made: each side needs >= {MIN_SEEDS} seeds in a column{note}"
    kinds = {k: sum(c.test.kind == k for c in made) for k in TEST_NAMES}
    text = ", ".join(f"{TEST_NAMES[k]} ({n})" for k, n in kinds.items() if n)
    return (
        f"tests: {text}: paired where both sides ran the same seeds (a seed draws the same "
        f"clients and initial model in every row), else Welch's; p Holm: {CORRECTION} over "
        f"the {len(made)} tests of this comparison; verdicts at p Holm < {LEVEL}{note}"
    )


def compare_lines(specs: list[str], metric: str = "test_acc") -> list[Table | str]:
    """`fedbench compare`: every pair of sides compared, as the terminal shows it."""
    return render(compare(specs, metric), metric)
