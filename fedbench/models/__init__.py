"""Model builders, created by name through MODELS.

Every module of this package is imported here, so a new model is one new module (a builder
decorated with `@MODELS.register(name)`, docs/extending.md) and no list to edit.
"""

from fedbench.models.base import MODELS, build_model, count_trainable
from fedbench.registry import import_submodules

import_submodules(__name__, __path__)
MODELS.open()  # lookups load the plugins first (fedbench.plugins)

__all__ = ["MODELS", "build_model", "count_trainable"]
