"""docs/api.md's examples run as doctests, and `import fedbench` exposes exactly the documented
surface (lazily: importing fedbench loads no torch)."""

import doctest
import subprocess
import sys
from pathlib import Path

import fedbench

ROOT = Path(__file__).resolve().parents[1]


def test_api_page_examples_pass() -> None:
    failures, tried = doctest.testfile(
        str(ROOT / "docs" / "api.md"),
        module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        verbose=False,
    )
    assert tried >= 15 and failures == 0


def test_public_surface_is_the_documented_one() -> None:
    page = (ROOT / "docs" / "api.md").read_text()
    for name in fedbench.__all__:
        if name != "__version__":
            assert f"`{name}" in page, f"{name} is exported but not documented in docs/api.md"
            assert getattr(fedbench, name) is not None


def test_import_fedbench_stays_light() -> None:
    code = "import sys, fedbench; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
