"""A figure's name is written once: `@FIGURES.register(NAME)` sets the class's `name`."""

import ast
from pathlib import Path

import fedbench.figures
from fedbench.figures import FIGURES


def test_every_figure_knows_its_registered_name() -> None:
    assert len(list(FIGURES)) >= 8
    for name, cls in FIGURES.items():
        assert cls.name == name


def test_no_figure_module_repeats_its_name() -> None:
    folder = Path(fedbench.figures.__file__).parent
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                assigned = [
                    target.id
                    for stmt in node.body
                    if isinstance(stmt, ast.Assign)
                    for target in stmt.targets
                    if isinstance(target, ast.Name)
                ]
                assert "name" not in assigned, f"{path.name}: {node.name} sets name by hand"
