"""What a loaded plugin is, for a run's summary.json and its run id: its source, the version of
its distribution where it has one, and a SHA-256 of its code.

The code is the plugin's file, or every `.py` file of the top-level package its module belongs
to (a plugin's rule may live in a helper module beside the one that registers it), read in the
order of their paths below the package. An editable install changes its code without changing
its version, so the run id hashes the code, not the version.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedbench.plugins.source import PluginSource


@dataclass(eq=False)
class Plugin:
    """A loaded plugin: its source, the module it was imported as, what it registered
    (kind, name) and its code's SHA-256 (set once it has loaded)."""

    source: PluginSource
    module: str
    sha256: str | None = None
    registered: list[tuple[str, str]] = field(default_factory=list)

    @property
    def version(self) -> str | None:
        return self.source.version

    @property
    def code_id(self) -> str:
        """What a run id hashes: the code's SHA-256, else (code not on disk: a zip import) the
        distribution and its version."""
        return self.sha256 or f"{self.source.dist or self.source.target}=={self.version}"

    def record(self) -> dict[str, Any]:
        """The entry of summary.json's `plugins`."""
        return {
            "name": self.source.name,
            "kind": self.source.kind,
            "target": self.source.target,
            "distribution": self.source.dist,
            "version": self.version,
            "sha256": self.sha256,
            "registered": [f"{kind} {name}" for kind, name in self.registered],
        }

    def line(self) -> str:
        """`example 0.1.0 (entry point; code sha256 1a2b3c4d5e6f): algorithm signum, ...`."""
        version = f" {self.version}" if self.version else ""
        code = f"code sha256 {self.sha256[:12]}" if self.sha256 else "code not on disk"
        names = ", ".join(f"{kind} {name}" for kind, name in self.registered) or "nothing"
        return f"{self.source.name}{version} ({self.source.kind}; {code}): {names}"


def code_files(module: str) -> list[Path]:
    """The files of `module`'s code: its file, or every .py file of its top-level package."""
    top = sys.modules.get(module.split(".")[0])
    if top is None:
        return []
    paths = [Path(p) for p in getattr(top, "__path__", [])]
    if paths:
        return sorted(
            (f for root in paths for f in root.rglob("*.py") if "__pycache__" not in f.parts),
            key=lambda f: f.as_posix(),
        )
    file = getattr(sys.modules.get(module), "__file__", None)
    return [Path(file)] if file and Path(file).is_file() else []


def code_sha256(files: list[Path], roots: list[Path] | None = None) -> str | None:
    """SHA-256 over each file's path (relative to its root) and bytes; None without files."""
    if not files:
        return None
    digest = hashlib.sha256()
    for file in files:
        root = next((r for r in roots or [] if file.is_relative_to(r)), file.parent)
        digest.update(file.relative_to(root).as_posix().encode() + b"\0")
        digest.update(file.read_bytes() + b"\0")
    return digest.hexdigest()


def identify(source: PluginSource, module: str) -> str | None:
    """The SHA-256 of a loaded plugin's code (its file, or its top-level package's .py files)."""
    if source.kind == "file":
        return code_sha256([Path(source.target)])
    top = sys.modules.get(module.split(".")[0])
    roots = [Path(p) for p in getattr(top, "__path__", [])]
    return code_sha256(code_files(module), roots)
