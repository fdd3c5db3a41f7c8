"""Loading the plugins, once per process, when a registry is first read.

The registries (fedbench.registry) call `load` before a lookup or a listing, and `register`
calls `note_registration`, so that each name a plugin registers is known to come from it: its
run ids hash the plugin's code and its summary.json names it. A plugin that fails to import,
or registers a name that is taken, is one FedbenchError line naming it and the fix; what it had
registered is removed again.

Which plugins: the `fedbench.plugins` entry points and FEDBENCH_PLUGINS, then those declared
with `--plugin` (`declare`); in a sweep's worker, exactly the list the driver sent (`use`).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from fedbench.errors import FedbenchError
from fedbench.plugins.identity import Plugin, identify
from fedbench.plugins.source import (
    PluginSource,
    from_entry_points,
    from_environment,
    parse,
    unique,
)


class Unregisters(Protocol):
    """A registry, as the loader sees it: what a failed plugin registered is removed again."""

    def unregister(self, name: str) -> object: ...


@dataclass
class _State:
    #: --plugin values, in order.
    declared: list[PluginSource] = field(default_factory=list)
    #: A worker's list, sent by the driver: replaces the discovery.
    fixed: list[PluginSource] | None = None
    #: The entry points and FEDBENCH_PLUGINS, read once.
    discovered: list[PluginSource] | None = None
    loaded: dict[PluginSource, Plugin] = field(default_factory=dict)
    #: The plugin being imported now: its registrations are attributed to it.
    current: Plugin | None = None
    #: Something may be left to load (set by declare / use; cleared once all are loaded).
    pending: bool = True
    #: (registry, name, plugin) of every plugin registration, to undo a failed plugin's.
    registrations: list[tuple[Unregisters, str, Plugin]] = field(default_factory=list)


_state = _State()


def declare(values: Iterable[str], via: str = "--plugin") -> None:
    """Plugins named on the command line (a file or a module each), loaded after the
    discovered ones at the next registry read."""
    _state.declared.extend(parse(value, via) for value in values)
    _state.pending = True


def use(sources: Iterable[PluginSource]) -> None:
    """Load exactly these plugins (a worker: the driver's list), not what this process would
    discover; those already loaded stay."""
    _state.fixed = list(sources)
    _state.pending = True


def wanted() -> list[PluginSource]:
    """The plugins this process loads, in order (each target once)."""
    if _state.fixed is not None:
        return list(_state.fixed)
    if _state.discovered is None:
        _state.discovered = [*from_entry_points(), *from_environment()]
    return unique([*_state.discovered, *_state.declared])


def pending() -> bool:
    """Whether a registry read must call `load` first (cheap: read on every lookup)."""
    return _state.pending and _state.current is None


def load(after_each: Callable[[], object] = lambda: None) -> None:
    """Import every wanted plugin not loaded yet; `after_each` runs after each one, while its
    registrations are still attributed to it (the dp_ twins of its algorithms)."""
    if not pending():
        return
    for source in wanted():
        if source not in _state.loaded:
            _state.loaded[source] = _load_one(source, after_each)
    _state.pending = False


def _load_one(source: PluginSource, after_each: Callable[[], object]) -> Plugin:
    module = module_name(source)
    plugin = Plugin(source, module)
    _state.current = plugin
    try:
        _import(source, module)
        after_each()
    except FedbenchError:
        _undo(plugin, module)
        raise
    except Exception as exc:
        _undo(plugin, module)
        lines = str(exc).strip().splitlines()
        why = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
        raise FedbenchError(f"{source.label} failed to load ({why}); {source.fix}") from None
    finally:
        _state.current = None
    plugin.sha256 = identify(source, module)
    return plugin


def module_name(source: PluginSource) -> str:
    """The module a plugin is imported as; a file gets one from its name and path (two files
    called algo.py in different folders are two modules)."""
    if source.kind != "file":
        return source.target
    import hashlib

    stem = re.sub(r"\W", "_", Path(source.target).stem)
    return f"fedbench_plugin_{stem}_{hashlib.sha1(source.target.encode()).hexdigest()[:8]}"


def _import(source: PluginSource, module: str) -> None:
    if source.kind != "file":
        importlib.import_module(module)
        return
    spec = importlib.util.spec_from_file_location(module, source.target)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {source.target} as a module")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[module] = loaded  # pydantic and pickling resolve its classes by module
    spec.loader.exec_module(loaded)


def _undo(plugin: Plugin, module: str) -> None:
    """Remove what a plugin registered, and its module, so that a fixed plugin loads again."""
    for registry, name, owner in reversed(_state.registrations):
        if owner is plugin:
            registry.unregister(name)
    _state.registrations = [r for r in _state.registrations if r[2] is not plugin]
    for name in [m for m in sys.modules if m == module or m.startswith(f"{module}.")]:
        del sys.modules[name]


def current() -> Plugin | None:
    """The plugin being imported now (its registrations are its own), else None."""
    return _state.current


def note_registration(registry: Unregisters, kind: str, name: str) -> None:
    """`registry` (of `kind`) registered `name`: the plugin being imported, if any, owns it."""
    plugin = _state.current
    if plugin is not None:
        plugin.registered.append((kind, name))
        _state.registrations.append((registry, name, plugin))


def provider(kind: str, name: str) -> Plugin | None:
    """The loaded plugin that registered `name` in the registry of `kind`; None: fedbench."""
    candidates = [*_state.loaded.values(), *([_state.current] if _state.current else [])]
    return next((p for p in candidates if (kind, name) in p.registered), None)


def loaded() -> list[Plugin]:
    """The plugins loaded in this process, in load order."""
    return list(_state.loaded.values())


def reset() -> None:
    """Unload every plugin: its registrations and modules are removed and the discovery runs
    again at the next read (tests; a notebook that edits its plugin file)."""
    global _state
    for registry, name, _ in reversed(_state.registrations):
        registry.unregister(name)
    for plugin in _state.loaded.values():
        prefix = plugin.module + "."
        for module in [m for m in sys.modules if m == plugin.module or m.startswith(prefix)]:
            del sys.modules[module]
    _state = _State()
