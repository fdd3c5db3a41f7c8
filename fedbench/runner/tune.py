"""`fedbench tune`: each (row, column) of a table at its own best hyperparameters, chosen on a
validation split with Optuna (Akiba et al., KDD 2019).

Per cell, one Optuna study searches the named fields (`--space algorithm.lr=log:1e-4:1e-1`, TPE;
or `--grid algorithm.lr=1e-4,3e-4`, a grid) for a number of trials of a few rounds each, on
`data.val_fraction` of the training data held out as the evaluation set: the test set is never
seen. The objective is the table's metric (test_acc on that split) at the last round. Trials are
ordinary runs: they go through the sweep launcher, land in OUT/runs/ and resume like any run.
While they train (a batch of up to `workers` trials at once, of one cell or several), the
driver reads their metrics.jsonl and reports each evaluated round to the study; the pruner
(`--pruner`, PRUNERS; default Optuna's MedianPruner) stops a trial whose curve falls below the
median of earlier trials at the same round (a STOP request in its run folder: status `stopped`).
A pruned trial whose last value already beats the winner's final one is named in a note: the
pruner may have stopped the better setting.

The studies live in one SQLite file (OUT/<table>[-<preset>]-tune/study.db): a tune that is killed
resumes where it stopped when the same command is run again, its unfinished trials resuming from
their checkpoints. The result is tuned.yaml beside it, which `fedbench run TABLE --tuned` applies.
"""

from __future__ import annotations

import copy
import fcntl
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml

from fedbench.config import parse_run_config, read_yaml, set_path
from fedbench.engine.run_folder import RunFolder, child_folder
from fedbench.errors import FedbenchError
from fedbench.files import remove_stale_temporaries, write_file
from fedbench.os_errors import check_writable
from fedbench.readback import BadFile, TunedFile, validate
from fedbench.report.ran import cell_label
from fedbench.runner.space import (
    SPACE_HELP,
    SearchField,
    _split,
    optuna_module,
    parse_grid,
    parse_space,
    row_space,
)
from fedbench.runner.table_config import (
    MAX_RUNS,
    Plan,
    PlannedRun,
    TableConfig,
    Tuned,
    column_key,
)

if TYPE_CHECKING:
    import optuna

# Re-exported: the command line and callers parse --space/--grid through this module.
__all__ = ["SPACE_HELP", "SearchField", "parse_grid", "parse_space", "tune"]

#: `--pruner`: how a trial is stopped early; each builds an Optuna pruner.
PRUNERS: dict[str, str] = {
    "median": "Optuna's MedianPruner after 2 complete trials: stop a trial below the median of "
    "earlier trials at the same round",
    "halving": "Optuna's SuccessiveHalvingPruner (asynchronous successive halving)",
    "none": "no pruning: every trial runs all its rounds",
}
DEFAULT_PRUNER = "median"
TUNED_FILE = "tuned.yaml"
STUDY_FILE = "study.db"
STUDY_LOCK = "study.lock"
#: The metric a tune maximises (accuracy on the validation split).
OBJECTIVE = "test_acc"


def _optuna() -> Any:
    return optuna_module()


# ---------------------------------------------------------------------------------------------
# Cells and trials


@dataclass
class Cell:
    """One (row, column) of the table: its run config (first seed) and its study."""

    method: str
    setting: dict[str, Any]
    config: dict[str, Any]
    study: optuna.Study | None = None
    #: The fields this cell searches (--space/--grid, else its row's `tuning:` space).
    fields: list[SearchField] = field(default_factory=list)
    #: Trials this cell's study runs.
    trials: int = 0
    #: The study's pruner (a name of PRUNERS).
    pruner: str = "median"

    @property
    def opened(self) -> optuna.Study:
        """The study, once `_open_studies` has created or loaded it."""
        if self.study is None:
            raise RuntimeError(f"the study of {self.name} is not open")
        return self.study

    @property
    def column(self) -> str:
        return column_key(self.setting)

    @property
    def label(self) -> str:
        """The column by what runs in it ('CNN for ResNet-18 / Dir-0.6'): `column` stays the
        grid's key, as tuned.yaml and `--column` spell it."""
        return cell_label(self.setting, self.config)

    @property
    def name(self) -> str:
        """The study's key (by the grid's values: stable across presets, so tunes resume)."""
        return f"{self.method} | {self.column}"

    @property
    def shown(self) -> str:
        """The cell as printed: 'FedAvg | CNN for ResNet-18 / Dir-0.6'."""
        return f"{self.method} | {self.label}"


@dataclass
class Trial:
    cell: Cell
    trial: Any  # optuna.Trial, or a FrozenTrial of an interrupted tune being resumed
    run: PlannedRun
    reported: int = 0


def tuning_cells(
    plan: Plan, *, rounds: int | None, val_fraction: float, columns: list[str] | None = None
) -> list[Cell]:
    """The plan's (row, column) cells at their first seed, evaluated on the validation split."""
    wanted = [_split(c, "--column", "KEY=VALUE") for c in columns or []]
    cells: dict[tuple[str, str], Cell] = {}
    for run in plan.runs:
        if any(str(run.setting.get(k)) != v for k, v in wanted):
            continue
        key = (run.method, column_key(run.setting))
        if key in cells:
            continue
        data = run.cfg.to_dict()
        data["data"]["val_fraction"] = val_fraction
        if rounds is not None:
            data["fl"]["rounds"] = rounds
        cells[key] = Cell(run.method, dict(run.setting), data)
    if not cells:
        raise FedbenchError(
            f"no cell of {plan.table.table} matches --column {', '.join(columns or [])}"
        )
    return list(cells.values())


def _trial_run(cell: Cell, params: dict[str, Any], plan: Plan) -> PlannedRun:
    data = copy.deepcopy(cell.config)
    for key, value in params.items():
        set_path(data, key.split("."), value)
    try:
        cfg = parse_run_config(data)
    except FedbenchError as exc:
        raise FedbenchError(f"tune {cell.shown}: {exc}") from None
    return PlannedRun(cell.method, cell.setting, cfg.seed, cfg)


# ---------------------------------------------------------------------------------------------
# The driver


@dataclass
class TuneResult:
    folder: Path
    tuned: Tuned
    #: Per cell: (method, column, best values, best score, completed, pruned, failed).
    rows: list[tuple[str, str, dict[str, Any], float, int, int, int]] = field(default_factory=list)
    #: (method, column) -> the column by what ran in it (Cell.label).
    labels: dict[tuple[str, str], str] = field(default_factory=dict)
    #: Pruned trials whose last value beat their cell's winner (pruned_above_winner).
    notes: list[str] = field(default_factory=list)


Launch = Callable[[Plan], dict[str, Any]]


def tune(
    plan: Plan,
    fields: list[SearchField],
    *,
    out: Path,
    trials: int | None,
    rounds: int | None,
    val_fraction: float,
    launch: Launch,
    columns: list[str] | None = None,
    seed: int = 0,
    batch: int = 1,
    pruner: str = DEFAULT_PRUNER,
    on_trial: Callable[[str], None] | None = None,
) -> TuneResult:
    """Tune every cell of `plan` (see the module docstring); `launch` runs a plan of trials,
    `batch` at once (trials of one cell too). With no `fields`, each row searches its own
    `tuning:` space of the table config and rows without one are left out (`on_trial` says
    which). `pruner`: a name of PRUNERS."""
    check_pruner(pruner)
    cells = tuning_cells(plan, rounds=rounds, val_fraction=val_fraction, columns=columns)
    cells = _assign_spaces(cells, fields, plan.table, trials, val_fraction, on_trial)
    _check_space(cells, plan)  # a refused space writes nothing (no study.db)
    folder = child_folder(out, f"{plan.name}-tune")  # inside OUT whatever the table is named
    check_writable(folder)  # a read-only --out: one line, before SQLite fails without a path
    with study_lock(folder), study_errors(folder / STUDY_FILE):
        remove_stale_temporaries(folder)  # a tuned.yaml half-written by a killed tune
        check_study_file(folder / STUDY_FILE)
        _open_studies(
            cells,
            folder / STUDY_FILE,
            seed,
            lambda cell: study_name(cell, cell.fields, rounds, val_fraction),
            pruner,
        )
        queue = _resumed_trials(cells, plan)
        while True:
            queue += _new_trials(cells, plan, batch - len(queue))
            if not queue:
                break
            _run_batch(queue, plan, launch, out, on_trial)
            queue = []
        tuned, rows = _best(cells)
        notes = [note for cell in cells for note in pruned_above_winner(cell)]
    _write_tuned(folder / TUNED_FILE, plan, cells, tuned, rows, val_fraction, rounds)
    labels = {(cell.method, cell.column): cell.label for cell in cells}
    if on_trial is not None:
        for note in notes:
            on_trial(note)
    return TuneResult(folder, tuned, rows, labels, notes)


def check_pruner(name: str) -> None:
    """A `--pruner` that is not one of PRUNERS is a one-line error naming them."""
    if name not in PRUNERS:
        from fedbench.suggest import unknown

        raise FedbenchError(unknown("pruner", name, list(PRUNERS)))


def make_pruner(name: str) -> Any:
    """The Optuna pruner `--pruner NAME` stands for (PRUNERS)."""
    pruners = _optuna().pruners
    if name == "median":
        return pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0)
    if name == "halving":
        return pruners.SuccessiveHalvingPruner()
    return pruners.NopPruner()


def pruned_above_winner(cell: Cell) -> list[str]:
    """A note per pruned trial of `cell` whose last reported value (at the round it was stopped)
    is above the final value of the cell's best complete trial: the pruner stopped a setting
    that was ahead, and its final value is unknown."""
    if cell.study is None:
        return []
    trials = cell.study.get_trials(deepcopy=False)
    complete = [
        (float(t.value), t) for t in trials if t.state.name == "COMPLETE" and t.value is not None
    ]
    if not complete:
        return []
    best_value, best = max(complete, key=lambda scored: scored[0])  # the first best, as before
    notes = []
    for t in trials:
        if t.state.name != "PRUNED" or not t.intermediate_values:
            continue
        step = max(t.intermediate_values)
        value = t.intermediate_values[step]
        if value > best_value:
            notes.append(
                f"note: {cell.shown} trial {t.number} ({shown_values(t.params)}) was pruned at "
                f"round {step} at validation {OBJECTIVE} {value:.2f}, above the winner's final "
                f"{best_value:.2f} (trial {best.number}: {shown_values(best.params)}); its final "
                "value is unknown: run the tune again with --pruner none to let every trial finish"
            )
    return notes


def _check_space(cells: list[Cell], plan: Plan) -> None:
    """Every cell's config is valid at each end of every range and at every grid value (a field
    that does not exist, or a value out of its range, is an error before anything is written)."""
    for cell in cells:
        for f in cell.fields:
            for value in f.values:
                _trial_run(cell, {f.key: int(value) if f.kind == "int" else value}, plan)


def _assign_spaces(
    cells: list[Cell],
    fields: list[SearchField],
    table: TableConfig,
    trials: int | None,
    val_fraction: float,
    on_trial: Callable[[str], None] | None,
) -> list[Cell]:
    """Give each cell its search fields and trial budget: the command line's fields for every
    cell, else the row's `tuning:` space of the table config (rows without one are not tuned)."""
    if fields:
        budget = _trial_budget(fields, trials, val_fraction)
        for cell in cells:
            cell.fields, cell.trials = list(fields), budget
        check_tune_size(cells)
        return cells
    if not table.tuning:
        raise FedbenchError(
            f"give at least one --space or --grid field to tune ({table.table} has no `tuning:` "
            "spaces of its own)"
        )
    kept = [cell for cell in cells if cell.method in table.tuning]
    if not kept:
        raise FedbenchError(
            f"none of the chosen rows has a tuning space in {table.table}; rows with one: "
            f"{', '.join(table.tuning)} (or give --space/--grid)"
        )
    for cell in kept:
        cell.fields = row_space(cell.method, table.tuning[cell.method])
        cell.trials = _trial_budget(cell.fields, trials, val_fraction)
    check_tune_size(kept)
    skipped = sorted({c.method for c in cells} - set(table.tuning))
    if skipped and on_trial is not None:
        on_trial(f"not tuned (no tuning space in {table.table}): {', '.join(skipped)}")
    return kept


def _trial_budget(fields: list[SearchField], trials: int | None, val_fraction: float) -> int:
    """Trials per cell (with only --grid fields: the grid's size by default); checks the
    search fields and the validation fraction."""
    if not fields:
        raise FedbenchError("give at least one --space or --grid field to tune")
    if len({f.key for f in fields}) != len(fields):
        raise FedbenchError("a field is given twice in --space/--grid")
    if not 0 < val_fraction < 1:
        raise FedbenchError("--val-fraction must be in (0, 1): the test set is never tuned on")
    if trials is None:
        if any(f.kind != "grid" for f in fields):
            raise FedbenchError("--trials is required with --space")
        trials = grid_size(fields)
        if trials > MAX_TRIALS:
            raise FedbenchError(
                f"the grid has {trials:,} points, more than the {MAX_TRIALS:,} trials a cell may "
                "run (each trial is a run folder); list fewer values, or search a range with "
                "--space and --trials N"
            )
    if trials < 1:
        raise FedbenchError("--trials must be at least 1")
    if trials > MAX_TRIALS:
        raise FedbenchError(
            f"--trials {trials:,} is more than the {MAX_TRIALS:,} trials a cell may run (each "
            "trial is a run folder); ask for fewer"
        )
    return trials


#: The most trials one cell may run, and all cells together (like a sweep's MAX_RUNS): each
#: trial is a run folder and a row of study.db.
MAX_TRIALS = 10_000


def grid_size(fields: list[SearchField]) -> int:
    """The number of points of a grid (counted, not listed)."""
    return math.prod(len(f.values) for f in fields)


def check_tune_size(cells: list[Cell]) -> None:
    """Refuse a tune of more than MAX_RUNS trials over all its cells, counted in one line."""
    total = sum(cell.trials for cell in cells)
    if total > MAX_RUNS:
        raise FedbenchError(
            f"{len(cells)} cells x their trials is {total:,} trials, more than the {MAX_RUNS:,} "
            "a tune may hold (each trial is a run folder); ask for fewer trials, rows "
            "(--methods) or columns (--column)"
        )


def grid_point(fields: list[SearchField], index: int) -> dict[str, Any]:
    """Point `index` of the grid over `fields`, in itertools.product order (the last field
    changes fastest), without listing the points before it."""
    values = []
    for f in reversed(fields):
        index, at = divmod(index, len(f.values))
        values.append(f.values[at])
    return dict(zip([f.key for f in fields], reversed(values), strict=True))


def _space(fields: list[SearchField]) -> dict[str, str]:
    """The search space as text: `algorithm.lr: grid:0.01:0.1` or `algorithm.lr: log:1e-4:0.1`."""
    return {f.key: f"{f.kind}:{':'.join(str(v) for v in f.values)}" for f in fields}


def study_name(
    cell: Cell, fields: list[SearchField], rounds: int | None, val_fraction: float
) -> str:
    """A cell's study name, which includes the search space and the trial budget: the same command
    resumes its study, while a changed space (a grid extended by one value, say) or another
    --rounds/--val-fraction starts a new one (Optuna refuses to mix the distributions of two
    spaces in one study). Trials whose run folders exist are not trained again."""
    space = ",".join(f"{k}={v}" for k, v in _space(fields).items())
    return f"{cell.name} | {space} | rounds={rounds} val={val_fraction}"


def _open_studies(
    cells: list[Cell],
    path: Path,
    seed: int,
    signature: Callable[[Cell], str],
    pruner: str = DEFAULT_PRUNER,
) -> None:
    """Create (or load, when resuming) each cell's study in one SQLite file, pruned by
    `pruner` (not stored in the study: a resumed tune may prune otherwise)."""
    optuna = _optuna()
    storage = f"sqlite:///{path.resolve()}"
    for cell in cells:
        cell.pruner = pruner
        cell.study = optuna.create_study(
            study_name=signature(cell),
            storage=storage,
            load_if_exists=True,
            direction="maximize",
            sampler=optuna.samplers.TPESampler(seed=seed),
            pruner=make_pruner(pruner),
        )


def _enqueue_next_point(cell: Cell) -> None:
    """A grid cell: enqueue its next grid point just before it is asked for (Optuna's
    GridSampler stops the study from inside, which only works under study.optimize, not with
    ask/tell; and enqueueing every point up front is one SQLite write per point before any
    trial trains). The point's index is the number of trials so far, so a resumed tune goes on
    where it stopped; a point already waiting (enqueued, not asked) is asked first."""
    fields = cell.fields
    if not all(f.kind == "grid" for f in fields):
        return
    trials = cell.opened.get_trials(deepcopy=False)
    if any(t.state.name == "WAITING" for t in trials) or len(trials) >= grid_size(fields):
        return
    cell.opened.enqueue_trial(grid_point(fields, len(trials)))


@contextmanager
def study_lock(folder: Path) -> Iterator[None]:
    """Hold the tune folder's study: one `fedbench tune` at a time uses a study.db (two creating
    one study's schema at once crash in SQLAlchemy). An flock, released when its process dies."""
    fd = os.open(folder / STUDY_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FedbenchError(
                f"study in use: another `fedbench tune` is using {folder / STUDY_FILE}; wait for "
                "it to finish (then rerun this command: it resumes), or give another --out"
            ) from None
        yield
    finally:
        os.close(fd)


def check_study_file(path: Path) -> None:
    """A study.db that SQLite cannot open (a folder, other bytes) is a BadFile, before Optuna
    and SQLAlchemy fail on it at length."""
    fix = (
        f"remove {path} to start the studies afresh (trials whose runs finished are kept in "
        "runs/ and not trained again)"
    )
    if not path.exists():
        return
    if not path.is_file():
        raise BadFile(path, "is not a file", fix)
    with open(path, "rb") as fh:
        head = fh.read(len(_SQLITE_HEADER))
    if head and head != _SQLITE_HEADER:
        raise BadFile(path, "is not an SQLite database", fix)


_SQLITE_HEADER = b"SQLite format 3\x00"


@contextmanager
def study_errors(path: Path) -> Iterator[None]:
    """An error of the study's SQLite store (a full disk, a damaged or locked file) as one line
    naming the file, instead of SQLAlchemy's and Optuna's tracebacks."""
    import sqlite3

    optuna = _optuna()  # first: without Optuna (fedbench[tune]) SQLAlchemy is missing too
    from sqlalchemy.exc import SQLAlchemyError

    try:
        yield
    except (SQLAlchemyError, sqlite3.Error, optuna.exceptions.StorageInternalError) as exc:
        cause = exc
        while cause.__cause__ is not None or cause.__context__ is not None:
            cause = cause.__cause__ or cause.__context__  # the sqlite3 error says most
        what = str(getattr(cause, "orig", None) or cause).splitlines()[0][:200]
        raise FedbenchError(
            f"{path}: the study store failed ({type(cause).__name__}: {what}); if the disk is "
            "full, free space and rerun the same command (it resumes); if the file is damaged, "
            "remove it (trials whose runs finished are not trained again)"
        ) from None


def _score(trial: optuna.trial.FrozenTrial) -> float:
    """A COMPLETE trial's objective value (Optuna records one for every complete trial)."""
    if trial.value is None:
        raise RuntimeError(f"trial {trial.number} is complete without a value")
    return float(trial.value)


def _finished(study: Any) -> int:
    """Trials asked so far (between batches every RUNNING one is in the queue being resumed;
    WAITING ones are enqueued grid points not asked yet)."""
    return sum(t.state.name != "WAITING" for t in study.get_trials(deepcopy=False))


def _resumed_trials(cells: list[Cell], plan: Plan) -> list[Trial]:
    """Trials left RUNNING by a killed tune: run again (their runs resume from checkpoints)."""
    found = []
    for cell in cells:
        for frozen in cell.opened.get_trials(deepcopy=False):
            if frozen.state.name == "RUNNING":
                found.append(Trial(cell, frozen, _trial_run(cell, frozen.params, plan)))
    return found


def _new_trials(cells: list[Cell], plan: Plan, room: int) -> list[Trial]:
    """Up to `room` new trials, round-robin over the cells that still need some."""
    new: list[Trial] = []
    while len(new) < room:
        open_cells = [c for c in cells if _finished(c.opened) < c.trials]
        if not open_cells:
            break
        for cell in open_cells[: room - len(new)]:
            _enqueue_next_point(cell)
            trial = cell.opened.ask({f.key: f.distribution() for f in cell.fields})
            new.append(Trial(cell, trial, _trial_run(cell, trial.params, plan)))
    return new


def _report_progress(item: Trial, out: Path) -> None:
    """Report the trial's new evaluation rows to its study; ask a hopeless trial to stop."""
    if not hasattr(item.trial, "report"):  # a resumed FrozenTrial: it runs to its end
        return
    folder = RunFolder.for_config(out, item.run.cfg)
    rows = [r for r in folder.read_metrics() if r.get("round", 0) > 0]
    for row in rows[item.reported :]:
        value = row.get(OBJECTIVE)
        if value is not None and math.isfinite(value):
            item.trial.report(float(value), step=int(row["round"]))
    item.reported = max(item.reported, len(rows))
    if rows and not folder.stop_requested() and item.trial.should_prune():
        folder.request_stop(f"pruned by the {item.cell.pruner} rule at round {rows[-1]['round']}")


def _run_batch(
    queue: list[Trial],
    plan: Plan,
    launch: Launch,
    out: Path,
    on_trial: Callable[[str], None] | None,
) -> None:
    batch_plan = Plan(plan.table, plan.preset, [t.run for t in queue], plan.overrides)
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(launch, batch_plan)
        while not future.done():
            for item in queue:
                _report_progress(item, out)
            time.sleep(0.5)
        outcomes = future.result()
    for item in queue:
        _report_progress(item, out)
        _tell(item, outcomes.get(item.run.run_id), out)
        if on_trial is not None:
            on_trial(_describe(item))


def _tell(item: Trial, outcome: Any, out: Path) -> None:
    state = _optuna().trial.TrialState
    summary = RunFolder.for_config(out, item.run.cfg).read_summary() or {}
    status = summary.get("status") or getattr(outcome, "status", "failed")
    study = item.cell.opened
    number = item.trial.number
    value = (summary.get("final") or {}).get(OBJECTIVE)
    if status == "completed" and value is not None and math.isfinite(value):
        study.tell(number, float(value))
    elif status == "stopped":
        study.tell(number, state=state.PRUNED)
    else:
        study.tell(number, state=state.FAIL)  # diverged or failed: no score


def shown_values(values: Mapping[str, Any]) -> str:
    """Tried or tuned values as `lr=0.003, beta1=0.9` (floats to 4 significant digits)."""
    return ", ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items()
    )


def _describe(item: Trial) -> str:
    frozen = item.cell.opened.get_trials(deepcopy=False)[item.trial.number]
    values = shown_values(frozen.params)
    # The objective is measured on the validation split: say so, so it never reads as test accuracy.
    score = f" validation {OBJECTIVE} {frozen.value:.2f}" if frozen.value is not None else ""
    return (
        f"{item.cell.shown} trial {frozen.number}: {values} -> {frozen.state.name.lower()}{score}"
    )


def _best(
    cells: list[Cell],
) -> tuple[Tuned, list[tuple[str, str, dict[str, Any], float, int, int, int]]]:
    tuned: Tuned = {}
    rows: list[tuple[str, str, dict[str, Any], float, int, int, int]] = []
    for cell in cells:
        trials = cell.opened.get_trials(deepcopy=False)
        ok, pruned, failed = (
            sum(t.state.name == s for t in trials) for s in ("COMPLETE", "PRUNED", "FAIL")
        )
        complete = [t for t in trials if t.state.name == "COMPLETE"]
        if not complete:
            rows.append((cell.method, cell.column, {}, math.nan, ok, pruned, failed))
            continue
        best = max(complete, key=_score)
        tuned.setdefault(cell.method, {})[cell.column] = dict(best.params)
        rows.append((cell.method, cell.column, dict(best.params), _score(best), ok, pruned, failed))
    return tuned, rows


def _write_tuned(
    path: Path,
    plan: Plan,
    cells: list[Cell],
    tuned: Tuned,
    rows: list[tuple[str, str, dict[str, Any], float, int, int, int]],
    val_fraction: float,
    rounds: int | None,
) -> None:
    """Write (or update) tuned.yaml: the cells of this tune replace their earlier entries, the
    other cells (tuned by another command, e.g. another group of rows) are kept."""
    document: dict[str, Any] = {"table": plan.table.table, "preset": plan.preset, "rows": {}}
    if path.is_file():
        earlier = read_yaml(path)
        if earlier.get("table") == plan.table.table and earlier.get("preset") == plan.preset:
            # Validated: a damaged tuned.yaml is one line (BadFile), not merged into.
            fix = f"remove {path} to write a new one (or fix it)"
            document["rows"] = validate(path, earlier, TunedFile, fix).model_dump()["rows"]
    for cell, (method, column, values, score, complete, pruned, failed) in zip(
        cells, rows, strict=True
    ):
        document["rows"].setdefault(method, {})[column] = {
            "values": values,
            "score": None if math.isnan(score) else round(score, 4),
            "objective": {
                "metric": OBJECTIVE,
                "split": "validation",
                # By construction (data.validation.run_data): the trials never loaded the test
                # set. tune.py before that fix wrote the same split but scored on the test set;
                # tuned_split tells such files apart by this key.
                "test_set_seen": False,
                "val_fraction": val_fraction,
                "rounds": rounds,
                "at": "final round",
            },
            "space": _space(cell.fields),
            "trials": {"completed": complete, "pruned": pruned, "failed": failed},
        }
    header = "# Written by `fedbench tune`; apply with `fedbench run TABLE --tuned THIS_FILE`.\n"
    write_file(path, header + yaml.dump(document, Dumper=_NoAliases, sort_keys=False))


class _NoAliases(yaml.SafeDumper):
    """A YAML dumper that writes repeated values out in full (no `&id001` anchors): tuned.yaml
    is read by people."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def plan_to_tune(
    target: str, *, preset: str | None, methods: list[str] | None, overrides: list[str]
) -> tuple[Plan, str]:
    """The plan of TARGET at one seed (a table, an ablation, a table config's path, or a single
    run config's path as one cell named after its algorithm) and the command that runs it."""
    from fedbench.runner.sweep import make_plan
    from fedbench.runner.table_config import expand, find_table

    path = Path(target)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        data = read_yaml(path)
        if "table" not in data:  # a run config: one row named after its algorithm
            name = str((data.get("algorithm") or {}).get("name", "run"))
            table = TableConfig(
                table=path.stem, base=data, methods={name: {}}, seeds=[int(data.get("seed", 0))]
            )
            plan = expand(table, preset=preset, seeds=1, methods=methods, overrides=overrides)
            return plan, "train"
    try:
        find_table(target, "table")
        kind: Literal["table", "ablation"] = "table"
    except FedbenchError:
        kind = "ablation"
    plan = make_plan(target, kind, preset=preset, seeds=1, methods=methods, overrides=overrides)
    return plan, "ablate" if kind == "ablation" else "run"


# ---------------------------------------------------------------------------------------------
# Applying a tune


def check_tuned_columns(path: Path, tuned: Tuned, plan: Plan) -> None:
    """Every column tuned.yaml names is a column of the plan it is applied to: a column the plan
    lacks (another --set grid, a renamed value) would otherwise be silently ignored."""
    columns = {column_key(run.setting) for run in plan.runs}
    for method, cells in tuned.items():
        for column in cells:
            if column not in columns:
                raise BadFile(
                    path,
                    f"row {method!r} names column {column!r}, which this run of "
                    f"{plan.table.table} does not have (its columns: {'; '.join(sorted(columns))})",
                    "give the --preset and --set the tune was run with, or run "
                    f"`fedbench tune {plan.table.table}` again for these columns",
                )


#: What a report says of a tuned.yaml whose trials were scored on the test set: fedbench tune
#: before the validation split was held out of every run (it wrote `split: validation` all the
#: same, without `test_set_seen`).
TEST_SET_TUNED = (
    "chosen on the test set by an older fedbench tune (its trials did not hold out the "
    "validation split); run fedbench tune again"
)


def tuned_split(path: Path) -> str:
    """On which data the values of tuned.yaml `path` were chosen, as a report says it: 'a 0.1
    validation split of the training data (20-round trials)', or `TEST_SET_TUNED`."""
    data = read_yaml(path)
    objectives = [
        (entry or {}).get("objective") or {}
        for columns in (data.get("rows") or {}).values()
        for entry in (columns or {}).values()
        if isinstance(entry, dict) and entry.get("values")
    ]
    if not objectives or any(o.get("test_set_seen") is not False for o in objectives):
        return TEST_SET_TUNED
    fractions = sorted({f"{o.get('val_fraction'):g}" for o in objectives})
    rounds = sorted({str(o["rounds"]) for o in objectives if o.get("rounds") is not None})
    text = f"a {' / '.join(fractions)} validation split of the training data"
    return text + (f" ({' / '.join(rounds)}-round trials)" if rounds else "")


def load_tuned(path: Path, table: TableConfig) -> Tuned:
    """The per-cell overrides of a tuned.yaml written for `table` (checked against its rows)."""
    fix = f"fix it, or run `fedbench tune {table.table}` to write it again"
    data = read_yaml(path)
    if data.get("table") != table.table:
        raise FedbenchError(
            f"{path} is not a tuned.yaml for table {table.table!r} (it names "
            f"{data.get('table')!r}); run `fedbench tune {table.table}` to make one"
        )
    document = validate(path, data, TunedFile, fix)
    tuned: Tuned = {}
    for method, columns in document.rows.items():
        if method not in table.methods:
            raise FedbenchError(f"{path}: row {method!r} is not in {table.table}; {fix}")
        for column, entry in (columns or {}).items():
            values = (entry.values if entry is not None else None) or {}
            if values:
                tuned.setdefault(method, {})[column] = dict(values)
    if not tuned:
        raise FedbenchError(f"{path} holds no tuned values (no trial completed)")
    return tuned
