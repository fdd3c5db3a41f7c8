"""One small generic registry: algorithms, models and datasets register themselves by name."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from fedbench.errors import FedbenchError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps a public name to an object (a class or a builder function).

    >>> models = Registry[Callable]("model")
    >>> @models.register("logreg")
    ... def logreg(...): ...
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._items[name] = obj
            return obj

        return decorator

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
