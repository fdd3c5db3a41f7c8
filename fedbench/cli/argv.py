"""The command line as fedbench reads it around the parser: the checks made on `sys.argv` before
click parses it, and click's usage errors as fedbench's one line (exit code 2)."""

from __future__ import annotations

from fedbench.errors import FedbenchError

try:  # typer vendors click (typer._click) from 0.2x on; before, it runs on click itself
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover (older typer)
    from click import exceptions as click_errors  # type: ignore[no-redef]


def check_set_arguments(argv: list[str]) -> None:
    """`--set fl.rounds 5` (a space for '='): the one-line error of a `--set` without '=',
    naming the value, before the command-line parser reads `5` as an extra argument (a usage
    error of several lines) or as a command's CONFIG argument. Here, not in fedbench.config:
    it runs before every command, and the run config imports torch (`--help` must not)."""
    for at, arg in enumerate(argv[:-2]):
        key, value = argv[at + 1], argv[at + 2]
        if arg == "--set" and "=" not in key and not value.startswith("-"):
            raise FedbenchError(f"override {key!r} has no '='; write {key}={value}")


def check_plugin_position(argv: list[str]) -> None:
    """`fedbench train --plugin x.py`: `--plugin` is an option of fedbench itself, given before
    the command; after it the parser would answer with a usage error of several lines."""
    at = 0
    while at < len(argv) and argv[at].startswith("-"):
        at += 2 if argv[at] == "--plugin" else 1
    after = argv[at + 1 :]
    if any(arg == "--plugin" or arg.startswith("--plugin=") for arg in after):
        command = argv[at]
        raise FedbenchError(
            f"--plugin goes before the command: fedbench --plugin MODULE_OR_FILE {command} ..."
        )


def usage_error_line(exc: click_errors.UsageError) -> str:
    """A usage error (a bad-typed or unknown option, a missing argument) as fedbench's one
    line: what is wrong and where the command's options are listed, instead of click's
    Usage / Try / Error block."""
    names = []
    ctx = exc.ctx
    while ctx is not None and ctx.parent is not None:  # the root's name may be `python -m ..`
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    command = " ".join(["fedbench", *reversed(names)])
    return f"{exc.format_message().rstrip('.')}; see `{command} --help`"
