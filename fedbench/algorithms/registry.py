"""The algorithm registry (kept apart from __init__ so modules can import it without cycles)."""

from fedbench.algorithms.base import Algorithm
from fedbench.registry import Registry

ALGORITHMS: Registry[type[Algorithm]] = Registry("algorithm")
