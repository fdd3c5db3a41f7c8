"""fedbench's import graph has no cycles and algorithms/ sits below the run config.

Edges are every `import` in a module, at any depth (a function-level import still ties the two
modules together), except those under `if TYPE_CHECKING:`. Importing a.b.c also runs a and a.b
(their __init__), so an import from outside a package depends on the package itself too. A second
check adds the `if TYPE_CHECKING:` imports: a circle a type checker walks is a circle too (it
only hides until someone turns the import into a real one).
"""

import ast
from pathlib import Path

import fedbench

ROOT = Path(fedbench.__file__).parent

#: Cycles tolerated for a while, each with the change that will remove it (none today). A listed
#: cycle that is gone fails the test too, so that its entry is deleted.
KNOWN_CYCLES: set[frozenset[str]] = set()


def module_names() -> dict[str, Path]:
    names = {}
    for path in ROOT.rglob("*.py"):
        parts = ("fedbench", *path.relative_to(ROOT).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imports(node: ast.AST, typing: bool = False) -> list[str]:
    """Module names imported anywhere under `node`; those under `if TYPE_CHECKING:` only with
    `typing`."""
    if not typing and isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
        return []
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        assert node.level == 0 and node.module, "fedbench uses absolute imports"
        return [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return [name for child in ast.iter_child_nodes(node) for name in imports(child, typing)]


def import_graph(typing: bool = False) -> dict[str, set[str]]:
    modules = module_names()
    graph: dict[str, set[str]] = {}
    for source, path in modules.items():
        targets = set()
        for name in imports(ast.parse(path.read_text()), typing):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                target = ".".join(parts[:i])
                # The packages that contain `source` are already being imported when it runs.
                inside = source.startswith(target + ".") and i < len(parts)
                if target in modules and target != source and not inside:
                    targets.add(target)
        graph[source] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = {stack.pop()}
            while v not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.add(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_beyond_the_known_ones() -> None:
    found = cycles(import_graph())
    new = [sorted(c) for c in found - KNOWN_CYCLES]
    assert not new, f"import cycles: {new}; import downward (docs/extending.md, 'Layout')"
    gone = [sorted(c) for c in KNOWN_CYCLES - found]
    assert not gone, f"these cycles are gone: delete them from KNOWN_CYCLES: {gone}"


def test_no_import_cycles_even_for_typing() -> None:
    # `if TYPE_CHECKING:` hides a circle from the interpreter, not from the design: each type
    # has a home below everything that names it (algorithms/hyperparams.py for AlgorithmConfig).
    found = [sorted(c) for c in cycles(import_graph(typing=True))]
    assert not found, f"import cycles through TYPE_CHECKING imports: {found}"


def test_algorithms_import_nothing_above_them() -> None:
    # The run config composes the algorithm section, so algorithms/ must not import it, nor
    # any layer that builds on the config.
    above = tuple(
        f"fedbench.{name}"
        for name in ("config", "data", "models", "privacy", "engine", "runner", "report", "cli")
    )
    graph = import_graph()
    for source, targets in graph.items():
        if source.startswith("fedbench.algorithms"):
            assert not [t for t in targets if t.startswith(above)], source


def test_partitions_import_nothing_above_them() -> None:
    # The run config validates partition.kind against PARTITIONS, so the kinds read the
    # config's partition section through a protocol and import nothing at or above config.
    above = tuple(
        f"fedbench.{name}"
        for name in ("config", "data", "models", "privacy", "engine", "runner", "report", "cli")
    )
    graph = import_graph()
    assert "fedbench.partitions" in graph["fedbench.config"]
    for source, targets in graph.items():
        if source.startswith("fedbench.partitions"):
            assert not [t for t in targets if t.startswith(above)], source


def test_privacy_and_the_engine_import_nothing_above_them() -> None:
    # The mechanisms and the accountant sit below the engine that calls them, and the engine
    # below the runner; a command's view above them lives with the layer it reads
    # (`fedbench epsilon`: fedbench.report.epsilon; `fedbench train`: fedbench.runner.one_run).
    above = ("runner", "report", "figures", "catalog", "cli")
    graph = import_graph()
    for package, higher in (("privacy", ("engine", *above)), ("engine", above)):
        prefixes = tuple(f"fedbench.{name}" for name in higher)
        for source, targets in graph.items():
            if source.startswith(f"fedbench.{package}"):
                assert not [t for t in targets if t.startswith(prefixes)], source


def test_the_graph_sees_function_level_and_package_imports() -> None:
    graph = import_graph()
    assert "fedbench.engine.vectorized" in graph["fedbench.engine.run"]  # select_engine
    assert "fedbench.engine.vectorized" not in graph["fedbench.engine.loop"]
    assert "fedbench.algorithms" in graph["fedbench.config"]  # via fedbench.algorithms.params
    assert "fedbench.algorithms" not in graph["fedbench.algorithms.dp"]  # its own package
    assert "fedbench.config" not in graph["fedbench.figures.base"]  # under TYPE_CHECKING
    assert "fedbench.config" in import_graph(typing=True)["fedbench.figures.base"]
    assert (
        "fedbench.algorithms.base"
        not in import_graph(typing=True)["fedbench.algorithms.hyperparams"]
    )
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == {frozenset("abc")}


#: What the command line must not load before it has parsed its arguments: each costs seconds on
#: a loaded machine (torch alone 1-3 s), and `--help` needs none of them.
HEAVY_MODULES = ("torch", "timm", "transformers", "pandas", "matplotlib", "scipy", "opacus")
#: The command lines that only parse: the app's help and version, and every command's help.
PARSE_ONLY = [["--help"], ["--version"], ["list", "--help"], ["run", "--help"], ["bench", "--help"]]


def test_parsing_the_command_line_imports_no_heavy_module() -> None:
    # A fresh interpreter per command line: this test's own process has torch loaded already.
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from fedbench.cli import main\n"
        "sys.argv = ['fedbench', *sys.argv[1:]]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules), file=sys.stderr)\n"
    )
    for argv in PARSE_ONLY:
        done = subprocess.run(
            [sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr.strip().splitlines()[-1] == "[]", (argv, done.stderr)
