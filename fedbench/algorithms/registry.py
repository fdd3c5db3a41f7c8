"""The algorithm registry (kept apart from __init__ so modules can import it without cycles)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedbench.registry import Registry

if TYPE_CHECKING:
    from fedbench.algorithms.base import Algorithm

ALGORITHMS: Registry[type[Algorithm]] = Registry("algorithm")
