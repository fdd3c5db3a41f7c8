"""`fedbench.run_table` with worker processes from a plain script, and a failed table that a
script cannot miss (docs/api.md)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import fedbench
from fedbench.runner.main_guard import _is_main_test
from tests.conftest import tiny_table_data

ROOT = Path(__file__).resolve().parents[1]


def _script(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    data = tiny_table_data()
    data["seeds"] = [0]
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    script = tmp_path / "study.py"
    script.write_text(body)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_plain_script_with_workers_is_refused_before_any_run(tmp_path: Path):
    ran = _script(
        tmp_path,
        "import fedbench\n"
        "\n"
        'table = fedbench.run_table("tiny.yaml", out="out", workers=2)\n'
        'print("returned", table.failed)\n',
    )
    assert ran.returncode == 1  # the script's uncaught FedbenchError
    assert "returned" not in ran.stdout
    last = ran.stderr.strip().splitlines()[-1]
    assert last.startswith("fedbench.errors.FedbenchError: the sweep starts worker processes")
    assert f"imports {tmp_path / 'study.py'} again, and line 3 of it" in last
    assert 'put the script\'s calls under `if __name__ == "__main__":`' in last
    # One error, no multiprocessing bootstrapping tracebacks, and no run started or recorded.
    assert "bootstrapping" not in ran.stderr
    assert ran.stderr.count("Traceback") == 1
    assert not (tmp_path / "out" / "runs").exists()


@pytest.mark.slow
@pytest.mark.engine
def test_a_guarded_script_with_workers_trains_every_run(tmp_path: Path):
    ran = _script(
        tmp_path,
        "import fedbench\n"
        "\n"
        "def main():\n"
        '    table = fedbench.run_table("tiny.yaml", out="out", workers=2)\n'
        '    print("failed", table.failed, len(table.outcomes))\n'
        "\n"
        'if __name__ == "__main__":\n'
        "    main()\n",
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip().splitlines()[-1] == "failed [] 2"
    assert len(list((tmp_path / "out" / "runs").iterdir())) == 2


@pytest.mark.parametrize(
    ("test", "guard"),
    [
        ('__name__ == "__main__"', True),
        ("'__main__' == __name__", True),
        ('__name__ == "__main__" and True', True),
        ('__name__ != "__main__"', True),  # compares them: not ours to second-guess
        ('__name__ == "fedbench"', False),
        ("True", False),
    ],
)
def test_the_main_guard_is_recognised_in_its_spellings(test: str, guard: bool):
    node = ast.parse(f"if {test}:\n    pass\n").body[0]
    assert isinstance(node, ast.If)
    assert _is_main_test(node.test) is guard


def _diverging_table(tmp_path: Path) -> Path:
    data = tiny_table_data()
    data["seeds"] = [0]
    data["methods"] = {"Local SGD": {"algorithm": {"name": "fedavg", "lr": 1.0e30}}}
    path = tmp_path / "diverging.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.engine
def test_a_failed_table_raises_with_its_result_and_check_false_returns_it(tmp_path: Path):
    path = _diverging_table(tmp_path)
    with pytest.raises(fedbench.TableFailed) as raised:
        fedbench.run_table(str(path), out=tmp_path / "out", workers=1)
    result = raised.value.result
    assert raised.value.exit_code == 1
    assert isinstance(raised.value, fedbench.FedbenchError)
    assert [o.status for o in result.outcomes.values()] == ["diverged"]
    assert str(raised.value).startswith("1 of 1 runs of tiny failed or diverged (first: fedavg-")
    assert result.report.files  # the report was built before raising
    again = fedbench.run_table(str(path), out=tmp_path / "out", workers=1, check=False)
    assert again.failed == result.failed
