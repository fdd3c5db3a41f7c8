"""`fedbench train` below the command line: the resolved config as the run folder will hold it,
one run whose Ctrl-C says how to resume it, and the lines the command prints."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fedbench.errors import Interrupted

if TYPE_CHECKING:
    from rich.console import Console

    from fedbench.config import RunConfig
    from fedbench.engine.run import RunResult


def config_text(cfg: RunConfig, out: Path) -> str:
    """`train --print-config`: the resolved config (what config.yaml will hold) as plain YAML,
    after two comment lines: the run folder and where the data is read from."""
    import yaml

    from fedbench.data.base import resolved_location

    return (
        f"# run folder: {out / 'runs' / cfg.run_id()}\n"
        f"# data.path / data.root resolve to: {resolved_location(cfg.data)}\n"
        + yaml.safe_dump(cfg.to_dict(), sort_keys=False)
    )


def train_one(
    cfg: RunConfig, out: Path, *, save_model: bool, console: Console | None, resume: str
) -> RunResult:
    """Train (or resume, or skip a finished) run of `cfg` in OUT/runs/; a Ctrl-C raises
    Interrupted with the round reached and `resume`, the command that continues it."""
    from fedbench.engine import train

    try:
        return train(cfg, out, save_model=save_model, console=console)
    except KeyboardInterrupt:
        from fedbench.engine.run_folder import RunFolder

        folder = RunFolder.for_config(out, cfg)
        raise Interrupted(folder.interrupted_line(cfg.fl.rounds, resume)) from None


@dataclass(frozen=True)
class TrainReport:
    """What `fedbench train` prints: `config` (the --print-config YAML, written as is) or the
    `lines` about the run, then `error` where the run neither completed nor was asked to stop
    (the command shows it in red and exits with code 1)."""

    lines: list[str] = field(default_factory=list)
    config: str | None = None
    error: str | None = None


def train_command(
    config: Path | None,
    overrides: list[str],
    out: Path,
    *,
    save_model: bool,
    print_config: bool,
    console: Console | None,
    resume: str,
    print_plan: bool = False,
) -> TrainReport:
    """`fedbench train CONFIG`: load the run config with its overrides, then print it
    (`print_config`), print its execution plan (`print_plan`: every choice of how its steps
    run, with the reason; fedbench.engine.plan), or train it (resuming, or skipping a finished
    run) and say how it ended."""
    from fedbench.config import load_run_config
    from fedbench.engine.progress import final_line

    cfg = load_run_config(config, overrides)
    if print_config:
        return TrainReport(config=config_text(cfg, out))
    if print_plan:
        from fedbench.engine.plan import execution_plan
        from fedbench.engine.setup import prepare_run
        from fedbench.runner.plugin_lines import run_plugin_lines

        plan = execution_plan(prepare_run(cfg), group=1)  # `train` trains one run alone
        return TrainReport(
            [f"execution plan of {cfg.run_id()}:", *plan.lines(), *run_plugin_lines(cfg)]
        )
    result = train_one(cfg, out, save_model=save_model, console=console, resume=resume)
    summary = result.summary
    if result.status == "skipped":
        done = f"run {result.run_dir.name} is already done ({summary.get('status')})"
        return TrainReport([f"{done}: {result.run_dir}"])
    lines = [f"{result.status}: {result.run_dir}  {final_line(summary)}"]
    if result.status == "stopped":  # asked to stop (a STOP file in the run folder): not an error
        return TrainReport([*lines, f"stopped on request: {summary.get('error')}"])
    if result.status != "completed":
        return TrainReport(lines, error=f"{summary.get('error')}")
    return TrainReport(lines)
