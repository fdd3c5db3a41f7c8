"""The partition registry (apart from __init__ so kind modules can import it without cycles)."""

from __future__ import annotations

from fedbench.partitions.base import Split
from fedbench.registry import Registry

PARTITIONS: Registry[Split] = Registry("partition kind")
