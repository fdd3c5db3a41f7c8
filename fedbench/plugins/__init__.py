"""Plugins: a user's algorithm, model, dataset, partition kind or figure, in their own package or
file, registered without editing fedbench (docs/extending.md, "Plugins").

An installed package declares a `fedbench.plugins` entry point naming its module; code that is
not packaged is named with `fedbench --plugin MODULE_OR_FILE` or in FEDBENCH_PLUGINS. The
registries load them when a name is first looked up or listed, never while the command line
parses its arguments. A sweep sends its list of plugins to every worker process and Ray task.
A run that uses a name a plugin registered names the plugin in its summary.json, and its run id
hashes the plugin's code (`used`); a run of built-in names keeps its id.

This package sits at the bottom of fedbench (it imports nothing but its errors), below the
registries that read it.
"""

from __future__ import annotations

from collections.abc import Iterable

from fedbench.plugins.identity import Plugin
from fedbench.plugins.load import (
    current,
    declare,
    load,
    loaded,
    note_registration,
    pending,
    provider,
    reset,
    use,
    wanted,
)
from fedbench.plugins.source import ENTRY_POINT_GROUP, ENV_VAR, PluginSource


def used(names: Iterable[tuple[str, str]]) -> list[Plugin]:
    """The plugins that registered any of these (registry kind, name) pairs, each once, in load
    order: what produced a run that uses those names."""
    owners = {id(p): p for kind, name in names if (p := provider(kind, name)) is not None}
    return [p for p in loaded() if id(p) in owners]


def command_line() -> list[str]:
    """`--plugin` options that give a fedbench subprocess the plugins loaded here that it would
    not find itself (files and modules; it discovers installed entry points on its own)."""
    return [
        arg
        for source in wanted()
        if source.kind != "entry point"
        for arg in ("--plugin", source.target)
    ]


__all__ = [
    "ENTRY_POINT_GROUP",
    "ENV_VAR",
    "Plugin",
    "PluginSource",
    "command_line",
    "current",
    "declare",
    "load",
    "loaded",
    "note_registration",
    "pending",
    "provider",
    "reset",
    "use",
    "used",
    "wanted",
]
