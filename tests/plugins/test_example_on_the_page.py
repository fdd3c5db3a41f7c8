"""docs/extending.md's plugin walk-through shows the example package's files as they are: each
block headed by a file's path holds that file, so the page and the tested package cannot
drift apart."""

from __future__ import annotations

import re

from tests.plugins.conftest import EXAMPLE, ROOT

PAGE = ROOT / "docs" / "extending.md"
#: A block whose first line is `# examples/...`: the rest is that file.
BLOCK = re.compile(r"```(?:python|toml)\n# (examples/\S+)\n(.*?)```", re.DOTALL)


def test_every_file_of_the_example_is_on_the_page_as_it_is() -> None:
    shown = dict(BLOCK.findall(PAGE.read_text()))
    files = ["pyproject.toml", "fedbench_plugin_example/signum.py", "tests/test_signum.py"]
    assert sorted(shown) == sorted(f"examples/fedbench-plugin-example/{f}" for f in files)
    for path, text in shown.items():
        assert (ROOT / path).read_text() == text, path
    # The one file not shown is its package's docstring.
    init = EXAMPLE / "fedbench_plugin_example" / "__init__.py"
    assert init.read_text().count("\n") == 1 and init.read_text().startswith('"""')
