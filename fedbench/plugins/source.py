"""Where plugins come from: installed packages' `fedbench.plugins` entry points, the
`FEDBENCH_PLUGINS` environment variable and `fedbench --plugin MODULE_OR_FILE`.

A plugin is named by a `PluginSource`: a small frozen value that a sweep sends to its worker
processes and Ray tasks, so that each loads exactly the plugins the driver loaded (never by
accident of what the worker's environment or its re-import of a script happens to register).
This module imports nothing of fedbench but its errors: the registries, at the bottom of the
package, read it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from fedbench.errors import FedbenchError

#: The entry-point group an installed package declares its plugin module under.
ENTRY_POINT_GROUP = "fedbench.plugins"
#: The environment variable listing plugins (modules or files), separated by os.pathsep.
ENV_VAR = "FEDBENCH_PLUGINS"

#: A dotted module path (`mypkg.algorithms`).
MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")

Kind = Literal["entry point", "module", "file"]


@dataclass(frozen=True)
class PluginSource:
    """One plugin to load: an entry point of an installed distribution (`target` its module),
    a module on the path, or a Python file (`target` its absolute path). `name` is what the
    user knows it by (the entry point's name, the module, the file as given); `via` says where
    it was declared, for the error lines; `dist` and `version` are an entry point's
    distribution."""

    kind: Kind
    target: str
    name: str
    via: str
    dist: str | None = None
    version: str | None = None

    @property
    def short(self) -> str:
        """The name in a listing's `plugin` column: a file's name without its folder."""
        return Path(self.target).name if self.kind == "file" else self.name

    @property
    def label(self) -> str:
        """`plugin 'example' (entry point of fedbench-plugin-example 0.1.0)` for messages."""
        if self.kind == "entry point":
            return f"plugin {self.name!r} (entry point of {self.dist} {self.version})"
        return f"plugin {self.name} ({self.via})"

    @property
    def fix(self) -> str:
        """How to stop loading it, for the error lines."""
        if self.kind == "entry point":
            return f"fix it, or uninstall it: pip uninstall {self.dist}"
        if self.via == ENV_VAR:
            return f"fix it, or remove it from {ENV_VAR}"
        return "fix it, or drop that --plugin"


def parse(text: str, via: str) -> PluginSource:
    """A `--plugin` / FEDBENCH_PLUGINS value: a file (ends in .py or names a path) or a module."""
    value = text.strip()
    if value.endswith(".py") or os.sep in value or "/" in value:
        path = Path(value).expanduser()
        if not path.is_file():
            raise FedbenchError(
                f"plugin file {value} ({via}) not found; give the path of a Python file that "
                "registers the plugin, or a module name"
            )
        return PluginSource("file", str(path.resolve()), value, via)
    if not MODULE.fullmatch(value):
        raise FedbenchError(
            f"plugin {value!r} ({via}) is neither a Python file nor a module name; give e.g. "
            "my_algo.py or mypackage.algorithms"
        )
    return PluginSource("module", value, value, via)


def from_environment(environ: dict[str, str] | os._Environ[str] = os.environ) -> list[PluginSource]:
    """The plugins FEDBENCH_PLUGINS lists (empty entries are skipped)."""
    raw = environ.get(ENV_VAR, "")
    return [parse(item, ENV_VAR) for item in raw.split(os.pathsep) if item.strip()]


def from_entry_points() -> list[PluginSource]:
    """The `fedbench.plugins` entry points of the installed distributions, by name. Each must
    name a module (`example = "fedbench_plugin_example"`): importing it registers the plugin."""
    from importlib.metadata import entry_points

    found: list[PluginSource] = []
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        dist = point.dist
        source = PluginSource(
            "entry point",
            point.value,
            point.name,
            "entry point",
            dist.name if dist is not None else "an unknown distribution",
            dist.version if dist is not None else "",
        )
        if point.attr is not None or not MODULE.fullmatch(point.value):
            raise FedbenchError(
                f"{source.label} names {point.value!r}, not a module; declare the module whose "
                f'import registers it ({ENTRY_POINT_GROUP}: {point.name} = "package.module")'
            )
        found.append(source)
    return found


def unique(sources: list[PluginSource]) -> list[PluginSource]:
    """Each target once, the first declaration kept (a package installed and also named by
    --plugin loads once)."""
    seen: dict[tuple[str, str], PluginSource] = {}
    for source in sources:
        key = ("file" if source.kind == "file" else "module", source.target)
        seen.setdefault(key, source)
    return list(seen.values())
