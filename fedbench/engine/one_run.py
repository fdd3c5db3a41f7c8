"""`fedbench train` below the command line: the resolved config as the run folder will hold it,
and one run whose Ctrl-C says how to resume it."""

from __future__ import annotations

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
