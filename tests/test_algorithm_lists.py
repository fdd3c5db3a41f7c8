"""README's algorithm table and docs/algorithms.md name every registered algorithm, so that the
lists a reader meets cannot go stale when an algorithm module is added."""

import re
from pathlib import Path

from fedbench.algorithms import ALGORITHMS

ROOT = Path(__file__).resolve().parents[1]


def _named(text: str) -> set[str]:
    """Every identifier-like word of the text (names appear in code spans and headings)."""
    return set(re.findall(r"[a-z_0-9]+", text))


def test_docs_algorithms_names_every_registered_algorithm() -> None:
    named = _named((ROOT / "docs" / "algorithms.md").read_text())
    missing = sorted(name for name in ALGORITHMS if name not in named)
    assert not missing, f"docs/algorithms.md does not name: {missing}"


def test_readme_algorithm_table_names_every_non_dp_algorithm() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Algorithms", 1)[1].split("\n## ", 1)[0]
    named = _named(section)
    missing = sorted(n for n in ALGORITHMS if not n.startswith("dp_") and n not in named)
    assert not missing, f"README's Algorithms table does not name: {missing}"
