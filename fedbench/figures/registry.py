"""The figure registry (apart from __init__ so figure modules can import it without cycles)."""

from fedbench.figures.base import Figure
from fedbench.registry import Registry

FIGURES: Registry[type[Figure]] = Registry("figure")
