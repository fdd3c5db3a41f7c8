"""docs/extending.md's worked examples run: each module block is executed as the module it
names, its name is then found in its registry, listed by `fedbench list`, and works on tiny
data (the example's own test block runs); the registration is removed afterwards."""

from __future__ import annotations

import inspect
import re
import sys
import types
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "extending.md"

#: A block whose first line is `# <path>.py` is a complete file of the example.
BLOCK = re.compile(r"```python\n# (\S+\.py)\n(.*?)```", re.DOTALL)

#: module path -> (registry, `fedbench list` kind, registered name, its test's path)
EXAMPLES = {
    "fedbench/data/iris.py": ("DATASETS", "datasets", "iris", "tests/data/test_iris.py"),
    "fedbench/models/mlp2.py": ("MODELS", "models", "mlp2", "tests/models/test_mlp2.py"),
    "fedbench/partitions/quantity.py": (
        "PARTITIONS",
        "partitions",
        "quantity",
        "tests/data/test_partition_quantity.py",
    ),
    "fedbench/figures/partition_skew.py": (
        "FIGURES",
        "figures",
        "partition-skew",
        "tests/figures/test_partition_skew.py",
    ),
}


def blocks() -> dict[str, str]:
    return {path: code for path, code in BLOCK.findall(PAGE.read_text())}


@contextmanager
def loaded(path: str, code: str) -> Iterator[types.ModuleType]:
    """`code` run as the module `path` names (in sys.modules while the block runs, so that
    pydantic and pickling resolve it), removed afterwards."""
    name = path.removesuffix(".py").replace("/", ".")
    assert name not in sys.modules and not (ROOT / path).exists(), f"{path} exists for real"
    module = types.ModuleType(name)
    module.__file__ = str(ROOT / path)
    sys.modules[name] = module
    try:
        exec(compile(code, str(ROOT / path), "exec"), module.__dict__)
        yield module
    finally:
        del sys.modules[name]


def test_every_example_is_on_the_page() -> None:
    found = blocks()
    for module, (*_, test) in EXAMPLES.items():
        assert module in found and test in found, module


@pytest.mark.parametrize("module_path", list(EXAMPLES))
def test_worked_example_registers_lists_and_passes_its_test(
    module_path: str, run_cli, tmp_path: Path
) -> None:
    import fedbench

    registry_name, kind, name, test_path = EXAMPLES[module_path]
    registry = getattr(fedbench, registry_name)
    code = blocks()
    assert name not in registry
    try:
        with loaded(module_path, code[module_path]), loaded(test_path, code[test_path]) as tests:
            assert name in registry
            status, out, err = run_cli("list", kind)
            assert status == 0 and name in out, err
            ran = 0
            for test_name, test in vars(tests).items():
                if test_name.startswith("test_") and callable(test):
                    wanted = inspect.signature(test).parameters
                    test(**{"tmp_path": tmp_path} if "tmp_path" in wanted else {})
                    ran += 1
            assert ran >= 1
    finally:
        if name in registry:
            registry.unregister(name)
    assert name not in registry


def test_the_examples_train_together_from_the_command_line(run_cli, tmp_path: Path) -> None:
    """The pages' "use it" lines: iris with mlp2 on the quantity split, a few tiny rounds."""
    import json

    from fedbench import DATASETS, MODELS, PARTITIONS

    code = blocks()
    try:
        with ExitStack() as stack:
            for path in list(EXAMPLES)[:3]:
                stack.enter_context(loaded(path, code[path]))
            sets = [
                "data.name=iris",
                "model.name=mlp2",
                "partition.kind=quantity",
                "partition.alpha=1.0",
                "partition.clients=4",
                "fl.rounds=3",
                "fl.local_steps=5",
                "fl.batch_size=16",
                "fl.participation=1.0",
                "algorithm.name=fedavg",
                "algorithm.lr=0.1",
            ]
            args = [arg for item in sets for arg in ("--set", item)]
            status, _, err = run_cli("train", *args, "--out", str(tmp_path))
            assert status == 0, err
    finally:
        for registry, name in ((DATASETS, "iris"), (MODELS, "mlp2"), (PARTITIONS, "quantity")):
            if name in registry:
                registry.unregister(name)
    (run,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["d"] == (4 * 64 + 64) + (64 * 64 + 64) + (64 * 3 + 3)
    assert summary["final"]["test_acc"] > 60  # 3 balanced species: chance is 33%
    sizes = [c["n"] for c in json.loads((run / "partition.json").read_text())["clients"]]
    assert sum(sizes) == 120 and len(set(sizes)) > 1  # every sample once, unequal clients
