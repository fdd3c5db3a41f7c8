"""The papers' figures, one module per figure, registered by name in FIGURES.

Every module of this package is imported here, so a new figure is one new module (a
`Figure` subclass decorated with `@FIGURES.register(name)`) and no list to edit.
"""

import importlib
import pkgutil

from fedbench.figures.base import Claim, Figure, FigureContext, FigureData, FigureSettings
from fedbench.figures.registry import FIGURES

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["FIGURES", "Claim", "Figure", "FigureContext", "FigureData", "FigureSettings"]
