"""A usage error of any command (a bad-typed or unknown option, a missing argument) is fedbench's
one line and exit 2, not click's Usage / Try / Error block; the help of a command given nothing
and an explicit exit keep their behaviour."""

from __future__ import annotations

import inspect
import subprocess
import sys
import typing

import pytest
from typer.models import OptionInfo

from fedbench.cli import COMMANDS
from tests.conftest import cli_command, cli_env


def numeric_options() -> list[tuple[str, str]]:
    """(command, --option) of every option of every command that takes a number, from the
    commands' annotations (`Annotated[int | None, typer.Option("--name", ...)]`)."""
    found = []
    for name, command in COMMANDS.items():
        scope = vars(sys.modules[command.__module__])
        for parameter in inspect.signature(command).parameters.values():  # as typer reads it
            hint = parameter.annotation
            hint = eval(hint, scope) if isinstance(hint, str) else hint  # our own source
            if typing.get_origin(hint) is not typing.Annotated:
                continue
            base, *extras = typing.get_args(hint)
            kinds = set(typing.get_args(base)) or {base}
            options = [e for e in extras if isinstance(e, OptionInfo)]
            if options and kinds & {int, float}:
                # typer.Option("--name", ...): the name is the first positional argument.
                decls = [*options[0].param_decls, options[0].default]
                found.append((name, next(d for d in decls if str(d).startswith("--"))))
    return found


NUMERIC = numeric_options()


def test_every_command_with_a_numeric_option_is_covered() -> None:
    assert ("epsilon", "--client-size") in NUMERIC and ("run", "--workers") in NUMERIC
    assert len({command for command, _ in NUMERIC}) >= 4


@pytest.mark.parametrize(("command", "option"), NUMERIC)
def test_a_bad_number_is_one_line_and_exit_2(command: str, option: str, run_cli) -> None:
    code, out, err = run_cli(command, option, "abc")
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: Invalid value for") and option in err
    assert f"see `fedbench {command} --help`" in err and "Usage:" not in err + out


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_unknown_option_is_one_line_and_exit_2(command: str, run_cli) -> None:
    code, _, err = run_cli(command, "--no-such-option")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "No such option: --no-such-option" in err and "Try '" not in err


def test_a_missing_argument_and_an_unknown_command_are_one_line(run_cli) -> None:
    code, _, err = run_cli("run")
    assert (code, err.strip()) == (2, "error: Missing argument 'table'; see `fedbench run --help`")
    code, _, err = run_cli("frobnicate")
    assert code == 2 and err.strip().startswith("error: No such command 'frobnicate'")


def test_help_version_and_no_arguments_keep_their_exit_codes(run_cli) -> None:
    assert run_cli("epsilon", "--help")[0] == 0
    assert run_cli("--version")[0] == 0
    code, _, err = run_cli()  # no command: the help, on stderr, exit 2 (click's own)
    assert code == 2 and "Usage:" in err and "Commands" in err


def test_a_real_process_names_fedbench_not_the_module() -> None:
    proc = subprocess.run(
        cli_command("epsilon", "--client-size", "abc"),
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=300,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "see `fedbench epsilon --help`" in proc.stderr and "python -m" not in proc.stderr
