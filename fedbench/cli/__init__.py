"""The `fedbench` command line (Typer). One module per family of commands (running, reporting,
inspecting, privacy, benchmarking) over one app (`base`) and one set of shared options
(`options`); each command parses its arguments, calls one function of the layer below and
prints what it returns."""

from collections.abc import Callable

from fedbench.cli import benchmarking, inspecting, privacy, reporting, running
from fedbench.cli.base import app, console, err_console, interruptible, main

#: The commands in the order `fedbench --help` lists them.
COMMANDS: dict[str, Callable[..., None]] = {
    "train": running.train,
    "blocks": inspecting.blocks,
    "run": running.run,
    "ablate": running.ablate,
    "tune": running.tune,
    "report": reporting.report,
    "compare": reporting.compare,
    "figure": running.figure,
    "runs": reporting.runs,
    "plot": reporting.plot,
    "epsilon": privacy.epsilon,
    "bench": benchmarking.bench,
    "list": inspecting.list_,
}
for _name, _command in COMMANDS.items():
    app.command(_name)(interruptible(_command))

__all__ = ["COMMANDS", "app", "console", "err_console", "main"]
