"""Where plugins come from: --plugin / FEDBENCH_PLUGINS values, and installed entry points."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from fedbench.errors import FedbenchError
from fedbench.plugins.source import (
    ENV_VAR,
    PluginSource,
    from_entry_points,
    from_environment,
    parse,
    unique,
)


def test_a_value_is_a_file_or_a_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "algo.py").write_text("")
    monkeypatch.chdir(tmp_path)
    file = parse("algo.py", "--plugin")
    assert (file.kind, file.target, file.name) == ("file", str(tmp_path / "algo.py"), "algo.py")
    assert parse("mypkg.algorithms", ENV_VAR) == PluginSource(
        "module", "mypkg.algorithms", "mypkg.algorithms", ENV_VAR
    )
    with pytest.raises(FedbenchError, match=r"^plugin file gone\.py \(--plugin\) not found; "):
        parse("gone.py", "--plugin")
    with pytest.raises(FedbenchError, match="is neither a Python file nor a module name"):
        parse("my-algo", "--plugin")


def test_the_environment_variable_is_a_path_list(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("")
    value = os.pathsep.join([str(tmp_path / "a.py"), "", "pkg.mod "])
    found = from_environment({ENV_VAR: value})
    assert [(s.kind, s.target, s.via) for s in found] == [
        ("file", str(tmp_path / "a.py"), ENV_VAR),
        ("module", "pkg.mod", ENV_VAR),
    ]
    assert from_environment({}) == []


def _distribution(site: Path, name: str, entry_points: str) -> None:
    info = site / f"{name}-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_entry_points_of_installed_distributions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _distribution(tmp_path, "zeta_plugin", "[fedbench.plugins]\nzeta = zeta_pkg.algo\n")
    _distribution(
        tmp_path, "alpha_plugin", "[fedbench.plugins]\nalpha = alpha_pkg\n[other]\nx = y\n"
    )
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    found = [s for s in from_entry_points() if s.dist in ("zeta_plugin", "alpha_plugin")]
    assert [(s.name, s.target, s.dist, s.version) for s in found] == [
        ("alpha", "alpha_pkg", "alpha_plugin", "1.2.3"),
        ("zeta", "zeta_pkg.algo", "zeta_plugin", "1.2.3"),
    ]
    assert found[0].label == "plugin 'alpha' (entry point of alpha_plugin 1.2.3)"
    assert found[0].fix == "fix it, or uninstall it: pip uninstall alpha_plugin"


def test_an_entry_point_must_name_a_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _distribution(tmp_path, "attr_plugin", "[fedbench.plugins]\nbad = attr_pkg:register\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    with pytest.raises(FedbenchError) as error:
        from_entry_points()
    assert str(error.value) == (
        "plugin 'bad' (entry point of attr_plugin 1.2.3) names 'attr_pkg:register', not a "
        "module; declare the module whose import registers it (fedbench.plugins: bad = "
        '"package.module")'
    )


def test_each_target_loads_once_the_first_declaration_kept() -> None:
    installed = PluginSource("entry point", "pkg.algo", "algo", "entry point", "pkg", "1.0")
    again = PluginSource("module", "pkg.algo", "pkg.algo", "--plugin")
    other = PluginSource("module", "pkg.other", "pkg.other", "--plugin")
    assert unique([installed, again, other, other]) == [installed, other]


def test_a_subprocess_is_given_the_files_and_modules_not_the_entry_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fedbench import plugins

    (tmp_path / "algo.py").write_text("")
    _distribution(tmp_path, "ep_plugin", "[fedbench.plugins]\nep = ep_pkg\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    monkeypatch.setenv(ENV_VAR, "env_pkg.algo")
    plugins.declare([str(tmp_path / "algo.py")])
    assert plugins.command_line() == [
        "--plugin", "env_pkg.algo", "--plugin", str(tmp_path / "algo.py"),
    ]  # fmt: skip
