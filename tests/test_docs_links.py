"""Issue 13 item 8: the repository stands alone. README, docs, configs and docstrings point to the
repository's own docs (docs/algorithms.md, ...), never to files outside it, and every local
markdown link resolves."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: References to the specs and papers that live outside the repository.
OUTSIDE = re.compile(r"\.\./shared|/work/shared|ALGORITHMS\.md|DESIGN\.md|papers/\d")
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _text_files() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "Makefile", ROOT / "pyproject.toml"]
    for folder, patterns in {
        "docs": ("*.md",),
        "configs": ("*.yaml",),
        "fedbench": ("*.py",),
        "tests": ("*.py",),
    }.items():
        for pattern in patterns:
            files += sorted((ROOT / folder).rglob(pattern))
    here = Path(__file__).resolve()
    return [f for f in files if f.is_file() and f.resolve() != here and ".venv" not in f.parts]


def test_nothing_points_outside_the_repository() -> None:
    """The bug: README, docs and configs pointed to ../shared/ALGORITHMS.md, DESIGN.md, papers/."""
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _text_files()
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize(
    "doc", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name
)
def test_local_markdown_links_resolve(doc: Path) -> None:
    broken = [
        target
        for target in LINK.findall(doc.read_text())
        if "://" not in target and not (doc.parent / target).exists()
    ]
    assert not broken, f"{doc.name}: {broken}"
