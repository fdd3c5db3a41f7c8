"""The Typer app, its two consoles, drawing a listing, and the console entry point `main`."""

import functools
import os
import select
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from fedbench.cli.argv import (
    check_plugin_position,
    check_set_arguments,
    click_errors,
    usage_error_line,
)
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
#: The exit code when the reader of stdout went away (`fedbench runs | head -1`): a process
#: killed by SIGPIPE exits so in a shell, and shells and `set -o pipefail` know it.
STDOUT_CLOSED_EXIT = 128 + signal.SIGPIPE


class StdoutClosed(Exception):
    """The reader of stdout went away (`| head -1`): not an error, the command ends quietly."""


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """Rich's own answer to a closed stdout is SystemExit(1); `main` ends quietly instead."""
        self.quiet = True
        raise StdoutClosed


# Off a terminal (logs, CI) rich would wrap at 80 columns; tables read better wider.
console = _Console(width=None if sys.stdout.isatty() else 160)
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
    plugin: Annotated[
        list[str] | None,
        typer.Option(
            "--plugin",
            metavar="MODULE_OR_FILE",
            help="Load a plugin (a Python file or a module) that registers algorithms, models, "
            "datasets or partition kinds, for every command and its workers; repeatable, before "
            "the command (fedbench --plugin my_algo.py train ...). Also: FEDBENCH_PLUGINS; "
            "installed packages' fedbench.plugins entry points load by themselves.",
        ),
    ] = None,
) -> None:
    """Reproducible federated-optimisation experiments (FedAdamW, DP-FedAdamW, FedAdamom)."""
    if plugin:
        from fedbench import plugins

        plugins.declare(plugin)  # loaded at the first lookup of a name, not here


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


def interruptible(command: Callable[..., None]) -> Callable[..., None]:
    """`command` with a Ctrl-C anywhere in it ending as one line with the command that resumes
    and exit code 130 (Typer alone exits 130 silently). The commands that train raise their own
    Interrupted, which says how far they got; elsewhere every file is written atomically
    (fedbench.files), so nothing is half-written and running the command again carries on."""

    @functools.wraps(command)
    def wrapped(*args: Any, **kwargs: Any) -> None:
        try:
            command(*args, **kwargs)
        except BrokenPipeError:
            if _stdout_closed():  # past click, which would exit 1 on it: `main` ends quietly
                raise StdoutClosed from None
            raise  # another pipe (a worker's): a bug, with its traceback
        except KeyboardInterrupt:
            raise Interrupted(
                "interrupted; finished work is kept and nothing is half-written; resume: "
                f"{resume_command()}"
            ) from None

    return wrapped


def _stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (poll(2) reports POLLERR on its end)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a test's capture: no descriptor
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _end_quietly() -> None:
    """End with STDOUT_CLOSED_EXIT and nothing on stderr: what is still buffered for stdout goes to
    /dev/null (else Python's own flush at exit prints "Exception ignored ... BrokenPipeError")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # a stdout without a descriptor: nothing to do
        pass
    finally:
        os.close(devnull)
    sys.exit(STDOUT_CLOSED_EXIT)


#: The exit code of a command that SIGTERM ended (128 + 15, what a shell reports for a killed
#: one), after the same resume line as a Ctrl-C.
TERMINATED_EXIT_CODE = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, unwound as Ctrl-C is. A subclass, not KeyboardInterrupt itself: CPython ends a
    process whose top-level code saw a bare KeyboardInterrupt by SIGINT (exit -2) even after
    `sys.exit(143)`, and it tells the two apart by the exact type."""


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[list[int]]:
    """Within the block, SIGTERM (`kill`, `timeout`, a batch scheduler's time limit) acts as
    Ctrl-C: it raises SIGINT in this process, so the same code runs (a file being written is
    finished first: fedbench.files.interrupts_deferred; the launcher stops its workers; the
    command prints the line that resumes it). Where SIGINT is ignored (a background job of a
    script) it raises KeyboardInterrupt itself. Yields the list of SIGTERMs received, so that
    `main` exits with TERMINATED_EXIT_CODE. The one place the command line handles SIGTERM:
    extend it here (e.g. to clean up) rather than installing another handler."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def handler(signum: int, frame: Any) -> None:
        received.append(signum)
        # Run SIGINT's own Python handler here (Ctrl-C's KeyboardInterrupt, or the deferral of
        # fedbench.files.interrupts_deferred) rather than raising the signal: a SIGINT raised
        # while its disposition is the default would kill the process (exit -2, no cleanup).
        sigint = signal.getsignal(signal.SIGINT)
        if callable(sigint) and sigint is not signal.default_int_handler:
            sigint(signal.SIGINT, frame)  # deferred to the end of an atomic write
        else:
            raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


def _printable_streams() -> None:
    """Under a locale that cannot encode what fedbench prints (LC_ALL=C: ASCII), a character such
    as `±` is printed as `?` instead of failing after the work is done (files are UTF-8 anyway:
    fedbench.files)."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "")
        if encoding not in ("utf8", "utf16", "utf32") and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")


def main() -> None:
    """Console entry point: user errors become one line on stderr and exit code 2.

    Typer's own usage errors (unknown option, missing argument) also exit with code 2, and so
    does a full or read-only disk (one line, fedbench.os_errors). SIGTERM acts as Ctrl-C
    (`sigterm_as_ctrl_c`: temporary folders are removed as the command unwinds) and exits 143; a
    closed stdout (`| head -1`) ends quietly with STDOUT_CLOSED_EXIT.
    """
    _printable_streams()
    terminated: list[int] = []
    try:
        with sigterm_as_ctrl_c() as terminated:
            _run_app(terminated)
    except KeyboardInterrupt:
        # The SIGINT that a SIGTERM raises can land after the command has already unwound
        # (its line printed): a terminated command still exits 143, not by SIGINT.
        if terminated:
            sys.exit(TERMINATED_EXIT_CODE)
        raise
    finally:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _end_quietly()


def _run_click(args: list[str] | None = None) -> None:
    """The Typer app, every click error handled here, for every command: a usage error is one
    line and exit 2 (`usage_error_line`), the help of a command given no arguments is printed
    as click prints it, and an explicit exit (`typer.Exit`, --help, --version) keeps its code."""
    try:
        code = app(args=args, standalone_mode=False)
    except click_errors.NoArgsIsHelpError as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click_errors.UsageError as exc:
        raise FedbenchError(usage_error_line(exc)) from None
    except click_errors.ClickException as exc:
        err_console.print(f"error: {exc.format_message()}", markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except typer.Abort:
        err_console.print("Aborted!", markup=False, highlight=False)
        sys.exit(1)
    # Without standalone mode click returns an explicit exit's code (typer.Exit, --help).
    sys.exit(code if isinstance(code, int) else 0)


def _run_app(terminated: list[int]) -> None:
    try:
        check_set_arguments(sys.argv[1:])
        check_plugin_position(sys.argv[1:])
        _run_click()
    except StdoutClosed:
        _end_quietly()
    except FedbenchError as exc:
        prefix = "" if isinstance(exc, Interrupted) else "error: "
        err_console.print(f"{prefix}{exc}", markup=False, highlight=False, soft_wrap=True)
        interrupted = isinstance(exc, Interrupted) and terminated
        sys.exit(TERMINATED_EXIT_CODE if interrupted else exc.exit_code)
    except OSError as exc:  # a full or read-only disk: one line (fedbench.os_errors)
        from fedbench.os_errors import disk_error_line

        line = disk_error_line(exc)
        if line is None:
            raise
        err_console.print(f"error: {line}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(FedbenchError.exit_code)
