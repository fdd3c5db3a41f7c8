"""One small generic registry: algorithms, models, datasets, partitions and figures register
themselves by name, fedbench's own and those of plugins (fedbench.plugins)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from fedbench import plugins
from fedbench.errors import FedbenchError

T = TypeVar("T")

#: The registries whose package has registered its own entries (`Registry.open`).
_OPEN: list[Registry[Any]] = []


class Registry(Generic[T]):
    """Maps a public name to an object (a class or a builder function).

    >>> models = Registry[Callable]("model")
    >>> @models.register("logreg")
    ... def logreg(...): ...

    With `name_attribute`, registering also sets that attribute of the object to its name, so
    that a class knows the name it was registered under without writing it twice.

    Once its package has registered fedbench's own entries it calls `open`: from then on a
    lookup or a listing first loads the plugins (fedbench.plugins), so that their names are
    found, listed and suggested like the built-in ones; a name a plugin registers is recorded
    as the plugin's.
    """

    def __init__(self, kind: str, *, name_attribute: str | None = None) -> None:
        self.kind = kind
        self.name_attribute = name_attribute
        self._items: dict[str, T] = {}
        self._complete: Callable[[], object] | None = None
        self._open = False

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            # Only an open registry's new names can be a plugin's: a package that a plugin
            # imports first registers its own entries before it opens.
            plugin = plugins.current() if self._open else None
            if name in self._items:
                if plugin is not None:
                    raise FedbenchError(self._taken(name, plugin))
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            if self.name_attribute is not None:
                setattr(obj, self.name_attribute, name)
            self._items[name] = obj
            if plugin is not None:
                plugins.note_registration(self, self.kind, name)
            return obj

        return decorator

    def _taken(self, name: str, plugin: plugins.Plugin) -> str:
        owner = plugins.provider(self.kind, name)
        by = "fedbench" if owner is None else f"plugin {owner.source.name}"
        return (
            f"{plugin.source.label} registers {self.kind} {name!r}, which {by} already "
            f"registers; rename it in the plugin, {plugin.source.fix.removeprefix('fix it, ')}"
        )

    def open(self, complete: Callable[[], object] | None = None) -> None:
        """The built-in entries are registered: reads load the plugins from now on.
        `complete` runs after each plugin has loaded (the algorithms' dp_ twins)."""
        self._complete = complete
        if not self._open:
            self._open = True
            _OPEN.append(self)

    def _with_plugins(self) -> None:
        if self._open and plugins.pending():
            plugins.load(after_each=_complete_open)

    def unregister(self, name: str) -> T:
        """Remove `name` and return what it named (a test or an example cleaning up)."""
        if name not in self._items:
            raise KeyError(f"{self.kind} {name!r} is not registered")
        return self._items.pop(name)

    @contextmanager
    def registered(self, name: str, obj: T) -> Iterator[T]:
        """`obj` registered as `name` for the duration of a `with` block."""
        self.register(name)(obj)
        try:
            yield obj
        finally:
            self.unregister(name)

    def get(self, name: str) -> T:
        self._with_plugins()
        if name not in self._items:
            from fedbench.suggest import unknown

            raise FedbenchError(unknown(self.kind, name, self._items))
        return self._items[name]

    def __contains__(self, name: object) -> bool:
        self._with_plugins()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        self._with_plugins()
        return iter(sorted(self._items))

    def items(self) -> list[tuple[str, T]]:
        self._with_plugins()
        return sorted(self._items.items())

    def origin(self, name: str) -> plugins.Plugin | None:
        """The plugin that registered `name`; None for fedbench's own."""
        self._with_plugins()
        return plugins.provider(self.kind, name)


def _complete_open() -> None:
    """After a plugin has loaded: each open registry's completion (the dp_ twins of its
    algorithms), while its registrations are still the plugin's."""
    for registry in _OPEN:
        if registry._complete is not None:
            registry._complete()


def import_submodules(package: str, path: Iterable[str], *, skip: Collection[str] = ()) -> None:
    """Import every module of `package` (found on its `__path__`), so that their registrations
    run: a new algorithm, dataset, model, partition kind or figure is one new module, with no
    list to edit. `skip` names modules that must not be imported eagerly (a `python -m`
    script: runpy warns when the module it runs was already imported by its package)."""
    for module in pkgutil.iter_modules(path):
        if module.name not in skip:
            importlib.import_module(f"{package}.{module.name}")
