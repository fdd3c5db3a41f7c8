"""The type checker's ratchet: pyproject.toml's [tool.mypy] `files` lists the fedbench packages
and modules that type-check (`make lint` runs mypy over them). All of fedbench does now, so the
list is the package itself: no module can leave the check, and no per-module override may switch
its errors off. Each entry must exist, so that a moved or renamed module is put back on the list
under its new name instead of silently leaving the check."""

from __future__ import annotations

import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: tomli, a dependency of mypy itself
    import tomli as tomllib

from tests.conftest import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _ratchet() -> list[str]:
    return PYPROJECT["tool"]["mypy"]["files"]


def test_every_ratchet_entry_is_a_fedbench_module_or_package_that_exists():
    entries = _ratchet()
    for entry in entries:
        path = ROOT / entry
        assert entry == "fedbench" or entry.startswith("fedbench/"), entry
        if entry.endswith(".py"):
            assert path.is_file(), f"{entry} is listed in [tool.mypy] files but does not exist"
        else:
            assert (path / "__init__.py").is_file(), f"{entry} is not a package"


def test_the_ratchet_lists_each_module_once():
    entries = _ratchet()
    assert entries == sorted(entries)
    assert len(set(entries)) == len(entries)
    packages = [e for e in entries if not e.endswith(".py")]
    inside = [e for e in entries for p in packages if e != p and e.startswith(p + "/")]
    assert inside == [], "a module of a listed package is listed again"


def test_make_lint_runs_mypy_and_dev_installs_it():
    lint = re.search(r"^lint:.*?(?=^\S|\Z)", (ROOT / "Makefile").read_text(), re.S | re.M)
    assert lint is not None and "$(BIN)/mypy" in lint.group(0)
    dev = PYPROJECT["project"]["optional-dependencies"]["dev"]
    assert any(re.match(r"mypy>=", d) for d in dev)
    assert PYPROJECT["tool"]["mypy"]["follow_imports"] == "silent"  # only listed modules report


def test_the_whole_package_is_checked_and_no_module_is_exempt():
    mypy = PYPROJECT["tool"]["mypy"]
    assert _ratchet() == ["fedbench"]
    # An unused `type: ignore` is an error, so every one left silences a real error.
    assert mypy["warn_unused_ignores"] is True
    for override in mypy.get("overrides", []):
        modules = override["module"]
        modules = [modules] if isinstance(modules, str) else modules
        assert not any(m.split(".")[0] == "fedbench" for m in modules), override
