"""README's stated figures stay true: the test count it promises for `make test` is within 20% of
what pytest collects, and its timings are ranges that name the machine they were measured on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


class _Count:
    """A pytest plugin that records how many tests a collection found."""

    def __init__(self) -> None:
        self.n = 0

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.n = len(session.items)


def collected_tests(request: pytest.FixtureRequest) -> int:
    """How many tests `pytest --collect-only -q tests` finds. When this session collected every
    test file (as `make test` does) its own items and deselected ones are counted, for free;
    else (one file run alone) the suite is collected once, in this process."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    deselected = list(reporter.stats.get("deselected", [])) if reporter is not None else []
    items = [*request.session.items, *deselected]
    files = {Path(str(item.path)).resolve() for item in items}
    if set((ROOT / "tests").rglob("test_*.py")) <= files:
        return len(items)
    count = _Count()
    code = pytest.main(
        ["--collect-only", "-q", "-p", "no:cacheprovider", str(ROOT / "tests")], plugins=[count]
    )
    assert code == 0
    return count.n


def test_readme_states_the_test_count_within_20_percent(request, capsys) -> None:
    stated = re.findall(r"about (\d+) tests", README)
    assert len(stated) == 1, "README states the test count once, as 'about N tests'"
    collected = collected_tests(request)
    capsys.readouterr()  # a nested collection's listing
    assert collected > 0
    assert abs(int(stated[0]) - collected) <= 0.2 * collected, (
        f"README says about {stated[0]} tests, pytest collects {collected}: update README.md "
        "(python benchmarks/readme_figures.py prints the figures)"
    )


def test_readme_timings_are_ranges_on_a_named_machine() -> None:
    # A single figure such as "~15 s" reads as a promise; a range with the machine does not.
    assert "~15 s" not in README and "~2 minutes" not in README
    for claim in re.findall(r"\d+(?:\.\d+)?-\d+(?:\.\d+)? (?:s|min)\b[^\n]*", README):
        assert "CPU" in claim or "core" in claim, claim
    assert "benchmarks/readme_figures.py" in README
    demo = (ROOT / "configs" / "demo.yaml").read_text()
    assert "half a minute" not in demo and "benchmarks/readme_figures.py" in demo
