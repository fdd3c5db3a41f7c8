"""The Typer app, its two consoles, drawing a listing, and the console entry point `main`."""

import shlex
import sys
from collections.abc import Sequence
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from fedbench.errors import FedbenchError, Interrupted
from fedbench.listing import Listing

app = typer.Typer(
    name="fedbench",
    help="Reproducible federated-optimisation experiments (FedAdamW, DP-FedAdamW, FedAdamom).",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Plain click help: typer's rich panels print a `<bool>` placeholder after every flag.
    rich_markup_mode=None,
)
# Off a terminal (logs, CI) rich would wrap at 80 columns; tables read better wider.
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True)


def _version(value: bool) -> None:
    if value:
        import fedbench

        console.print(f"fedbench {fedbench.__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Reproducible federated-optimisation experiments (FedAdamW, DP-FedAdamW, FedAdamom)."""


def say(text: str) -> None:
    """One line (or a few) as written: no markup, no highlighting, never wrapped."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def table(listing: Listing) -> Table:
    view = Table(title=listing.title)
    for column in listing.columns:
        view.add_column(
            column,
            justify="right" if column in listing.right else "left",
            overflow="fold" if listing.fold else "ellipsis",
        )
    for row in listing.rows:
        view.add_row(*row)
    return view


def show(parts: Sequence[str | Listing] | str | Listing) -> None:
    """Print what a layer below returned: text as written, a listing as a rich table."""
    for part in [parts] if isinstance(parts, str | Listing) else parts:
        if isinstance(part, Listing):
            console.print(table(part))
        else:
            say(part)


def resume_command() -> str:
    """The command line as typed, to run again after a Ctrl-C (it resumes)."""
    return shlex.join(["fedbench", *sys.argv[1:]])


def main() -> None:
    """Console entry point: user errors become one line on stderr and exit code 2.

    Typer's own usage errors (unknown option, missing argument) also exit with code 2, and so
    does a full or read-only disk (one line, fedbench.os_errors).
    """
    try:
        from fedbench.config import check_set_arguments

        check_set_arguments(sys.argv[1:])
        app()
    except FedbenchError as exc:
        prefix = "" if isinstance(exc, Interrupted) else "error: "
        err_console.print(f"{prefix}{exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except OSError as exc:  # a full or read-only disk: one line (fedbench.os_errors)
        from fedbench.os_errors import disk_error_line

        line = disk_error_line(exc)
        if line is None:
            raise
        err_console.print(f"error: {line}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(FedbenchError.exit_code)
