"""The example plugin package in a fresh virtualenv, through the plain `fedbench` console script
in fresh processes: listed, trained on both executors, swept by two spawned workers, tuned,
reported, its epsilon computed; a broken plugin is one line with exit code 2.

The virtualenv is made here (`python -m venv`), and pip installs fedbench itself (from a copy
of this checkout) and the example package into it, as a user would; offline: no build
isolation, no dependencies, no index. torch and fedbench's other dependencies come from the
virtualenv running the tests, whose site-packages a `.pth` file puts at the end of the new
one's path (installing them would need the network and minutes). Nothing of this checkout is
on that path: what runs is what pip installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.plugins.conftest import EXAMPLE, ROOT

pytestmark = [pytest.mark.slow, pytest.mark.engine]

PACKAGE_FILES = ("__init__.py", "signum.py")
SMALL = [
    *("--set", "model.name=logreg", "--set", "partition.clients=6", "--set", "fl.rounds=2"),
    *("--set", "fl.participation=0.5", "--set", "fl.local_steps=3", "--set", "fl.batch_size=16"),
    *("--set", "algorithm.name=signum", "--set", "algorithm.lr=0.01", "--set", "eval.every=1"),
]
#: What pip needs of this checkout to build fedbench (pyproject.toml names the readme).
CHECKOUT_FILES = ("pyproject.toml", "README.md")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtualenv with fedbench and the example installed by pip (module docstring);
    both built from copies, so that the builds leave nothing in the checkout."""
    root = tmp_path_factory.mktemp("plugin")
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "build")
    fedbench_source = root / "fedbench-source"
    shutil.copytree(ROOT / "fedbench", fedbench_source / "fedbench", ignore=skip)
    for name in CHECKOUT_FILES:
        shutil.copy(ROOT / name, fedbench_source / name)
    example_source = root / "example-source"
    shutil.copytree(EXAMPLE, example_source, ignore=skip)
    env = root / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120
    )
    python = env / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # torch and the rest (and pip itself, to run): the test virtualenv's packages, after the
    # new one's own on the path.
    parents = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (Path(site) / "zz_parent_packages.pth").write_text("\n".join(parents) + "\n")
    offline = ["--no-deps", "--no-build-isolation", "--no-index", "--quiet"]
    done = subprocess.run(
        [str(python), "-m", "pip", "install", *offline, str(fedbench_source), str(example_source)],
        capture_output=True,
        text=True,
        timeout=600,
        env=clean_env(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    yield env


def clean_env(**extra: str) -> dict[str, str]:
    """The test's environment without a path to this checkout or a declared plugin."""
    drop = {"PYTHONPATH", "FEDBENCH_PLUGINS"}
    clean = {k: v for k, v in os.environ.items() if k not in drop}
    return {**clean, "COLUMNS": "200", **extra}


def fedbench(venv: Path, *args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    """The virtualenv's plain `fedbench` console script."""
    return subprocess.run(
        [str(venv / "bin" / "fedbench"), *args],
        cwd=cwd,
        env=clean_env(**extra),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_virtualenv_runs_what_pip_installed(venv: Path, tmp_path: Path) -> None:
    """fedbench and the plugin are imported from the new virtualenv, not from this checkout."""
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import fedbench, fedbench_plugin_example as p; print(fedbench.__file__, p.__file__)"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert all(Path(path).is_relative_to(venv) for path in where), where


def example_sha256() -> str:
    digest = hashlib.sha256()
    for name in PACKAGE_FILES:
        path = EXAMPLE / "fedbench_plugin_example" / name
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def test_the_example_passes_its_own_test(venv: Path, tmp_path: Path) -> None:
    python = str(venv / "bin" / "python")
    done = subprocess.run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_listed_trained_on_both_executors_and_its_epsilon(venv: Path, tmp_path: Path) -> None:
    listed = fedbench(venv, "list", "algorithms", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = [line for line in listed.stdout.splitlines() if "signum " in line]
    assert [row.split("│")[1].strip() for row in rows] == ["dp_signum", "signum"]
    assert all(row.split("│")[-2].strip() == "signum" for row in rows)  # the plugin column
    card = fedbench(venv, "list", "algorithms", "signum", cwd=tmp_path)
    assert card.returncode == 0, card.stderr
    assert "from plugin signum 0.1.0 (entry point; code sha256 " in card.stdout
    assert "momentum of the gradients whose sign is the step" in card.stdout

    summaries = {}
    for executor in ("sequential", "vectorized"):
        out = tmp_path / executor
        args = ["train", *SMALL, "--set", f"runtime.engine={executor}", "--out", str(out)]
        done = fedbench(venv, *args, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        (run_dir,) = (out / "runs").iterdir()
        summaries[executor] = json.loads((run_dir / "summary.json").read_text())
    for executor, summary in summaries.items():
        assert summary["status"] == "completed" and summary["engine"] == executor
        assert summary["plugins"] == [
            {
                "name": "signum",
                "kind": "entry point",
                "target": "fedbench_plugin_example.signum",
                "distribution": "fedbench-plugin-example",
                "version": "0.1.0",
                "sha256": example_sha256(),
                "registered": ["algorithm signum", "algorithm dp_signum"],
            }
        ]
    # One computation on two executors (float32: they agree to rounding).
    losses = [s["final"]["train_loss"] for s in summaries.values()]
    assert losses[0] == pytest.approx(losses[1], rel=1e-4)

    plan = fedbench(venv, "train", *SMALL, "--print-plan", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert f"plugin: signum 0.1.0 (entry point; code sha256 {example_sha256()[:12]})" in plan.stdout
    privacy = ["--set", "algorithm.name=dp_signum", "--client-size", "100"]
    epsilon = fedbench(venv, "epsilon", *privacy, cwd=tmp_path)
    assert epsilon.returncode == 0, epsilon.stderr
    assert "epsilon" in epsilon.stdout


def _table(tmp_path: Path) -> Path:
    table = {
        "table": "plugged",
        "title": "a plugin beside a built-in",
        "base": {
            "data": {"name": "digits", "augment": False},
            "partition": {"kind": "dirichlet", "alpha": 0.6, "clients": 5},
            "model": {"name": "logreg"},
            "fl": {"rounds": 2, "participation": 0.4, "local_steps": 2, "batch_size": 16},
            "algorithm": {"name": "fedavg", "lr": 0.1},
            "eval": {"every": 1, "train_subset": 200},
            "runtime": {"checkpoint_every": 0, "device": "cpu"},
        },
        "methods": {
            "FedAvg": {"algorithm": {"name": "fedavg"}},
            "Signum": {"algorithm": {"name": "signum", "lr": 0.01}},
        },
        "seeds": [0],
        "metrics": ["test_acc"],
    }
    path = tmp_path / "plugged.yaml"
    path.write_text(yaml.safe_dump(table, sort_keys=False))
    return path


def test_a_two_worker_sweep_its_report_and_tune(venv: Path, tmp_path: Path) -> None:
    table = _table(tmp_path)
    out = tmp_path / "out"
    done = fedbench(venv, "run", str(table), "--workers", "2", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    plan = json.loads((out / "plugged" / "plan.json").read_text())
    assert {run["status"] for run in plan["runs"]} == {"completed"}
    by_method = {
        run["method"]: json.loads((out / "runs" / run["run_id"] / "summary.json").read_text())
        for run in plan["runs"]
    }
    assert [p["name"] for p in by_method["Signum"]["plugins"]] == ["signum"]
    assert by_method["FedAvg"]["plugins"] == []
    report = fedbench(venv, "report", str(out / "plugged"), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "Signum" in report.stdout and "signum, lr=0.01" in report.stdout

    tune_args = ["--methods", "Signum", "--grid", "algorithm.beta=0.5,0.9", "--rounds", "1"]
    tuned = fedbench(
        venv, "tune", str(table), *tune_args, "--workers", "1", "--out", str(out), cwd=tmp_path
    )
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    written = yaml.safe_load((out / "plugged-tune" / "tuned.yaml").read_text())
    (cell,) = written["rows"]["Signum"].values()  # the table's one column
    assert cell["values"]["algorithm.beta"] in (0.5, 0.9)


def test_a_broken_installed_or_declared_plugin_is_one_line(venv: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import numpy\nnumpy.no_such_function()\n")
    done = fedbench(venv, "list", "algorithms", cwd=tmp_path, FEDBENCH_PLUGINS=str(broken))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"error: plugin {broken} (FEDBENCH_PLUGINS) failed to load (AttributeError: module "
        "'numpy' has no attribute 'no_such_function'); fix it, or remove it from "
        "FEDBENCH_PLUGINS\n"
    )
    clash = tmp_path / "clash.py"
    clash.write_text(
        "from fedbench.algorithms import ALGORITHMS\n"
        "from fedbench_plugin_example.signum import Signum\n"
        "ALGORITHMS.register('signum')(Signum)\n"
    )
    done = fedbench(venv, "--plugin", str(clash), "train", "--print-plan", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        f"error: plugin {clash} (--plugin) registers algorithm 'signum', which plugin signum "
        "already registers; rename it in the plugin, or drop that --plugin\n"
    )
