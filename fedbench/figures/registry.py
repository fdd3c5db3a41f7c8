"""The figure registry (apart from __init__ so figure modules can import it without cycles)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedbench.registry import Registry

if TYPE_CHECKING:
    from fedbench.figures.base import Figure

#: Registering a figure class sets its `name` (the name `fedbench figure NAME` takes), so the
#: name is written once, in the decorator.
FIGURES: Registry[type[Figure]] = Registry("figure", name_attribute="name")
