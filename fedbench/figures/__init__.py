"""The papers' figures, one module per figure, registered by name in FIGURES.

Every module of this package is imported here, so a new figure is one new module (a
`Figure` subclass decorated with `@FIGURES.register(name)`) and no list to edit.
"""

from fedbench.figures.base import Claim, Figure, FigureContext, FigureData, FigureSettings
from fedbench.figures.registry import FIGURES
from fedbench.registry import import_submodules

import_submodules(__name__, __path__)
FIGURES.open()  # lookups load the plugins first (fedbench.plugins)

__all__ = ["FIGURES", "Claim", "Figure", "FigureContext", "FigureData", "FigureSettings"]
