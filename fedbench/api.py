"""The Python API: what `import fedbench` offers notebooks and other tools (docs/api.md).

Each function is the library call behind a command of the CLI, with the same files written
and the same errors raised (fedbench.errors.FedbenchError for anything a user can fix):

- `load_config` ........ the resolved run config of `fedbench train [CONFIG] [--set k=v]...`
- `train` .............. `fedbench train`: one run (resumed, or read back when finished)
- `run_table` .......... `fedbench run TABLE` / `fedbench ablate NAME`: a sweep and its report
- `make_report` ........ `fedbench report DIR/<table>`: the report rebuilt from the run folders

The registries (ALGORITHMS, MODELS, DATASETS, FIGURES) are exported beside them.

An argument of the wrong type is a FedbenchError naming the argument and what it takes (a string
where a list belongs is never iterated character by character).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fedbench.errors import FedbenchError

if TYPE_CHECKING:
    from fedbench.config import RunConfig
    from fedbench.engine.run import RunResult
    from fedbench.report.build import Report
    from fedbench.runner.launcher import Outcome
    from fedbench.runner.table_config import Plan


def _wrong(name: str, value: Any, takes: str) -> FedbenchError:
    return FedbenchError(f"{name} takes {takes}, not {type(value).__name__} {value!r:.80}")


def _path(name: str, value: Any) -> Path:
    if not isinstance(value, str | Path):
        raise _wrong(name, value, "a path (str or pathlib.Path)")
    if "\x00" in str(value):  # the OS would refuse it with a bare ValueError naming nothing
        raise FedbenchError(f"{name} {str(value)!r:.80} holds a NUL character; no path can")
    return Path(value)


def _strings(name: str, value: Any) -> list[str]:
    """A list of strings; one string alone is refused (it would be read letter by letter)."""
    if isinstance(value, str) or not isinstance(value, Sequence | set | frozenset):
        raise _wrong(name, value, "a list of strings (one string: put it in a list)")
    if not all(isinstance(item, str) for item in value):
        bad = next(item for item in value if not isinstance(item, str))
        raise _wrong(f"every item of {name}", bad, "a string")
    return list(value)


def _seeds(value: Any) -> int | list[int] | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    whole = isinstance(value, Sequence) and not isinstance(value, str)
    if whole and all(isinstance(s, int) and not isinstance(s, bool) for s in value):
        return list(value)
    raise _wrong("seeds", value, "a number of seeds (int), a list of ints, or None")


def _optional_int(name: str, value: Any) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise _wrong(name, value, "an int or None")


def _workers(value: Any) -> int | None:
    """None (one per core or GPU slot) or a count of at least 1 (-1 divided by zero before)."""
    count = _optional_int("workers", value)
    if count is not None and count < 1:
        raise FedbenchError(f"workers takes a count of at least 1 or None, not {count}")
    return count


def _optional_str(name: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _wrong(name, value, "a string or None")


def load_config(
    path: str | Path | None = None, overrides: Sequence[str] = (), **sections: Any
) -> RunConfig:
    """A validated run config: the YAML file at `path` (or the built-in defaults), then the
    `sections` given as keyword arguments (merged into the file's sections), then every
    `key.path=value` override, exactly as `fedbench train PATH --set ...` resolves it.

    >>> cfg = load_config(overrides=["algorithm.name=fedavg"], fl={"rounds": 3})
    >>> cfg.algorithm.name, cfg.fl.rounds, cfg.algorithm.lr
    ('fedavg', 3, 0.1)
    """
    from fedbench.config import apply_overrides, parse_run_config, read_yaml

    overrides = _strings("overrides", overrides)
    # Any: the file's YAML is any value until parse_run_config checks it.
    data: Any = read_yaml(_path("path", path)) if path is not None else {}
    for name, section in sections.items():
        base = data.get(name)
        merge = isinstance(base, Mapping) and isinstance(section, Mapping)
        data[name] = {**base, **section} if merge else section
    return parse_run_config(apply_overrides(data, list(overrides)))


def train(
    config: RunConfig | Mapping[str, Any] | str | Path,
    out: str | Path = "results",
    *,
    save_model: bool = False,
) -> RunResult:
    """Train one run into OUT/runs/<run_id>/ (resuming an interrupted one; a finished one is
    read back with status 'skipped'). `config` is a RunConfig, a mapping of sections, or the
    path of a YAML run config."""
    from fedbench.config import RunConfig, parse_run_config
    from fedbench.engine.run import train as train_run

    if isinstance(config, str | Path):
        config = load_config(config)
    elif isinstance(config, Mapping):
        config = parse_run_config(dict(config))
    elif not isinstance(config, RunConfig):
        raise _wrong("config", config, "a RunConfig, a mapping of sections, or a YAML file's path")
    if not isinstance(save_model, bool):
        raise _wrong("save_model", save_model, "True or False")
    return train_run(config, _path("out", out), save_model=save_model)


@dataclass
class TableResult:
    """A sweep's plan, its report folder, every run's outcome and the report."""

    plan: Plan
    folder: Path
    outcomes: dict[str, Outcome]
    report: Report

    @property
    def failed(self) -> list[str]:
        """The run ids that failed or diverged."""
        return [r for r, o in self.outcomes.items() if o.status in ("failed", "diverged")]


class TableFailed(FedbenchError):
    """Runs of a table failed or diverged (`fedbench run` exits with code 1): `result` is the
    TableResult, its report built, failed cells marked. Raised by `run_table(check=True)`."""

    exit_code = 1

    def __init__(self, result: TableResult) -> None:
        failed = result.failed
        first = result.outcomes[failed[0]]
        super().__init__(
            f"{len(failed)} of {len(result.outcomes)} runs of {result.plan.name} failed or "
            f"diverged (first: {failed[0]}: {first.status}: {first.error}); the report in "
            f"{result.folder} marks their cells; run it again to retry them (finished runs are "
            "skipped), or pass check=False to get the result back"
        )
        self.result = result


def run_table(
    name: str,
    *,
    preset: str | None = None,
    seeds: int | list[int] | None = None,
    methods: Sequence[str] | None = None,
    overrides: Sequence[str] = (),
    out: str | Path = "results",
    workers: int | None = None,
    kind: Literal["table", "ablation"] = "table",
    check: bool = True,
) -> TableResult:
    """Run every (row, column, seed) of table NAME (or of ablation NAME with kind="ablation")
    into OUT/runs/, skipping finished runs, then build its report in OUT/<table>[-<preset>]/.

    A run that failed or diverged raises TableFailed (its `result` holds the report), as
    `fedbench run` exits with code 1; with `check=False` the result comes back and its `failed`
    lists them. With several worker processes, a script must call this under
    `if __name__ == "__main__":` (each worker imports the script again): without it a
    FedbenchError says so before any run starts."""
    from fedbench.report.build import build_report
    from fedbench.runner.sweep import make_plan, run_sweep

    if not isinstance(name, str):
        raise _wrong("name", name, "a table or ablation name, or a table config's path (str)")
    if kind not in ("table", "ablation"):
        raise _wrong("kind", kind, "'table' or 'ablation'")
    if not isinstance(check, bool):
        raise _wrong("check", check, "True or False")
    plan = make_plan(
        name,
        kind,
        preset=_optional_str("preset", preset),
        seeds=_seeds(seeds),
        methods=_strings("methods", methods) if methods is not None else None,
        overrides=_strings("overrides", overrides),
    )
    result = run_sweep(plan, _path("out", out), workers=_workers(workers))
    table = TableResult(plan, result.folder, result.outcomes, build_report(result.folder))
    if check and table.failed:
        raise TableFailed(table)
    return table


def make_report(folder: str | Path, *, metrics: Sequence[str] = ()) -> Report:
    """Rebuild the report of a table folder (OUT/<table>[-<preset>]/) from its run folders;
    `metrics` adds further metrics.jsonl columns (e.g. client_drift)."""
    from fedbench.report.build import build_report

    return build_report(_path("folder", folder), metrics=_strings("metrics", metrics))
