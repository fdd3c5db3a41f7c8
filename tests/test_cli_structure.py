"""The command line stays thin: small modules, each option defined once, run and ablate from
one definition, commands that only parse, call below and print, and nothing below importing it."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import typer
from typer.core import TyperArgument, TyperOption

import fedbench.cli
from fedbench.cli import COMMANDS, app, running
from tests.test_import_graph import import_graph

CLI = Path(fedbench.cli.__file__).parent
FAMILIES = ("running", "reporting", "inspecting", "privacy", "benchmarking")
MAX_LINES = 300


def option_declarations(source: str) -> list[str | None]:
    """The first name of every `typer.Option(...)` call in SOURCE (None: no explicit name)."""
    found: list[str | None] = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "Option"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "typer"
        ):
            first = node.args[0] if node.args else None
            explicit = isinstance(first, ast.Constant) and str(first.value).startswith("--")
            found.append(str(first.value) if explicit else None)  # type: ignore[union-attr]
    return found


def test_every_module_is_at_most_300_lines() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in CLI.glob("*.py")}
    assert set(sizes) >= {"__init__.py", "base.py", "options.py", *(f"{f}.py" for f in FAMILIES)}
    assert not {name: n for name, n in sizes.items() if n > MAX_LINES}, sizes


def test_the_declaration_finder_sees_names_and_unnamed_options() -> None:
    source = (
        'A = typer.Option("--seeds", help="x")\nB = typer.Option(min=1)\nC = Other.Option("--x")'
    )
    assert option_declarations(source) == ["--seeds", None]


def test_each_option_is_declared_once_by_its_name() -> None:
    declared = [
        (name, path.name)
        for path in sorted(CLI.glob("*.py"))
        for name in option_declarations(path.read_text())
    ]
    unnamed = [where for name, where in declared if name is None]
    assert not unnamed, f"typer.Option without its --name in {unnamed}: name it"
    twice = [name for name, n in Counter(name for name, _ in declared).items() if n > 1]
    assert not twice, f"{twice} declared more than once: share one in fedbench/cli/options.py"
    # The options several commands take live in options.py.
    shared = {name for name, where in declared if where == "options.py"}
    assert shared >= {"--set", "--preset", "--seeds", "--methods", "--workers", "--out"}
    assert shared >= {"--launcher", "--ray-address", "--dry-run", "--estimate", "--write-plan"}


def _commands() -> dict:
    return typer.main.get_command(app).commands  # type: ignore[attr-defined]


def _params(name: str) -> list:
    return _commands()[name].params


def test_run_and_ablate_share_every_option_and_differ_in_their_argument() -> None:
    def options(name: str) -> list[tuple]:
        return [
            (p.opts, p.default, getattr(p, "help", None))
            for p in _params(name)
            if isinstance(p, TyperOption)
        ]

    assert options("run") == options("ablate")
    assert len(options("run")) == 13
    (run_table,) = [p for p in _params("run") if isinstance(p, TyperArgument)]
    (ablation,) = [p for p in _params("ablate") if isinstance(p, TyperArgument)]
    assert (run_table.name, ablation.name) == ("table", "name")
    assert running.run.__doc__ != running.ablate.__doc__


def test_the_commands_are_registered_in_order_from_one_table() -> None:
    assert list(_commands()) == list(COMMANDS)
    assert len(COMMANDS) == 13


def test_family_modules_hold_commands_only() -> None:
    commands = {fn.__name__ for fn in COMMANDS.values()} | {"sweep_command"}
    for family in FAMILIES:
        tree = ast.parse((CLI / f"{family}.py").read_text())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert defined <= commands, f"{family}.py: {defined - commands} belong below the CLI"


def test_nothing_below_imports_the_command_line() -> None:
    graph = import_graph()
    importers = [
        source
        for source, targets in graph.items()
        if not source.startswith("fedbench.cli")
        and source != "fedbench.__main__"
        and any(t == "fedbench.cli" or t.startswith("fedbench.cli.") for t in targets)
    ]
    assert importers == [], "the command line is the top layer"
