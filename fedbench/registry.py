"""One small generic registry: algorithms, models, datasets, partitions and figures register
themselves by name."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from fedbench.errors import FedbenchError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps a public name to an object (a class or a builder function).

    >>> models = Registry[Callable]("model")
    >>> @models.register("logreg")
    ... def logreg(...): ...

    With `name_attribute`, registering also sets that attribute of the object to its name, so
    that a class knows the name it was registered under without writing it twice.
    """

    def __init__(self, kind: str, *, name_attribute: str | None = None) -> None:
        self.kind = kind
        self.name_attribute = name_attribute
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            if self.name_attribute is not None:
                setattr(obj, self.name_attribute, name)
            self._items[name] = obj
            return obj

        return decorator

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
        if name not in self._items:
            from fedbench.suggest import unknown

            raise FedbenchError(unknown(self.kind, name, self._items))
        return self._items[name]

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))

    def items(self) -> list[tuple[str, T]]:
        return sorted(self._items.items())


def import_submodules(package: str, path: Iterable[str], *, skip: Collection[str] = ()) -> None:
    """Import every module of `package` (found on its `__path__`), so that their registrations
    run: a new algorithm, dataset, model, partition kind or figure is one new module, with no
    list to edit. `skip` names modules that must not be imported eagerly (a `python -m`
    script: runpy warns when the module it runs was already imported by its package)."""
    for module in pkgutil.iter_modules(path):
        if module.name not in skip:
            importlib.import_module(f"{package}.{module.name}")
