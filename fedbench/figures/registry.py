"""The figure registry (apart from __init__ so figure modules can import it without cycles)."""

from fedbench.figures.base import Figure
from fedbench.registry import Registry

#: Registering a figure class sets its `name` (the name `fedbench figure NAME` takes), so the
#: name is written once, in the decorator.
FIGURES: Registry[type[Figure]] = Registry("figure", name_attribute="name")
