"""Plugin tests start and end with no plugin loaded, and with none declared by the environment:
a plugin registered by one test must not leak into the next (nor into `fedbench list`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fedbench import plugins

ROOT = Path(__file__).resolve().parents[2]
#: The example plugin package (docs/extending.md, "Plugins").
EXAMPLE = ROOT / "examples" / "fedbench-plugin-example"
#: Its one algorithm file, also usable alone as a file plugin.
SIGNUM_FILE = EXAMPLE / "fedbench_plugin_example" / "signum.py"


@pytest.fixture(autouse=True)
def no_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(plugins.ENV_VAR, raising=False)
    plugins.reset()
    yield
    plugins.reset()


@pytest.fixture
def signum_file(tmp_path: Path) -> Path:
    """A copy of the example's algorithm file, free to edit."""
    path = tmp_path / "signum.py"
    path.write_text(SIGNUM_FILE.read_text())
    return path
