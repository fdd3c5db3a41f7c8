"""Shared test helpers: invoking the CLI, reading run folders, a tiny table.

The CLI is called one way: in-process through the `run_cli` fixture. Tests that need a real
process (the console entry point, a SIGKILL) build it with `cli_command` and `cli_env`."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fedbench.cli import main

ROOT = Path(__file__).resolve().parents[1]

# One torch thread count in this process and in every fedbench process a test starts: left to
# itself fedbench picks it from the machine's load (fedbench.threads), and runs agree to the last
# digit only at one count (a resumed run against an uninterrupted one). After fedbench: its
# import sets OpenMP's passive wait policy, which torch reads when it loads.
import torch  # noqa: E402

os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))

# A suite started in the background by a shell (`make test &`, nohup) inherits SIGINT ignored,
# and every process it starts would ignore it too (an ignored signal stays ignored across exec,
# and Python then installs no KeyboardInterrupt handler): the Ctrl-C tests would test the shell's
# choice, not fedbench. Python's own handler here, so the processes it starts get the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def run_cli(monkeypatch, capsys):
    """Run `fedbench ARGS...` in-process; returns (exit_code, stdout, stderr)."""
    monkeypatch.setenv("COLUMNS", "200")  # rich tables wide enough not to wrap

    def invoke(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()  # only this call's output
        monkeypatch.setattr(sys, "argv", ["fedbench", *args])
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err

    return invoke


def cli_command(*args: str) -> list[str]:
    """`python -m fedbench ARGS...` for a real process (with `cli_env()`)."""
    return [sys.executable, "-m", "fedbench", *args]


def cli_env() -> dict[str, str]:
    """The environment of a real fedbench process: this checkout first on the path."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def train_until_checkpoint(args: list[str], out: Path, timeout: float = 300):
    """`fedbench train ARGS --out OUT` in a real process, returned (still running, unless it
    finished first) as soon as it has written a checkpoint, for a test to SIGKILL."""
    import subprocess
    import time

    proc = subprocess.Popen(
        cli_command("train", *args, "--out", str(out)),
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if list(out.glob("runs/*/checkpoint.pt")):
            break
        time.sleep(0.01)
    return proc


def algorithm_needs(name: str) -> list[str]:
    """The settings a run of algorithm `name` needs beyond what a global algorithm needs, for
    the tests that run every registered algorithm on one config: a personalised method its
    clients' own test data (the personalised protocol), FedBN a model with BatchNorm layers."""
    from fedbench.algorithms import ALGORITHMS
    from fedbench.algorithms.personal import PersonalAlgorithm

    if not issubclass(ALGORITHMS.get(name), PersonalAlgorithm):
        return []
    needs = ["partition.client_test_fraction=0.2"]
    if name == "fedbn":
        needs.append("model.name=cnn_bn")
    return needs


def read_metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def strip_elapsed(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k != "elapsed_s"} for row in rows]


#: A run of a few seconds on the embedded digits data.
TINY = [
    "--set",
    "model.name=logreg",
    "--set",
    "partition.clients=6",
    "--set",
    "fl.rounds=4",
    "--set",
    "fl.participation=0.5",
    "--set",
    "fl.local_steps=3",
    "--set",
    "fl.batch_size=16",
    "--set",
    "eval.every=2",
]


def tiny_table_data() -> dict[str, Any]:
    return {
        "table": "tiny",
        "title": "tiny test table",
        "paper": {"table": "fedadamw_table1", "rows": {"Local SGD": "FedAvg"}},
        "base": {
            "data": {"name": "digits", "augment": False},
            "partition": {"kind": "dirichlet", "alpha": 0.6, "clients": 5},
            "model": {"name": "logreg"},
            "fl": {"rounds": 3, "participation": 0.4, "local_steps": 2, "batch_size": 16},
            "algorithm": {"name": "fedadamw", "lr": 1.0e-2, "grad_clip": 10.0},
            "eval": {"every": 1, "train_subset": 200},
            "runtime": {"checkpoint_every": 0, "device": "cpu"},
        },
        "grid": {"partition.alpha": [0.6]},
        "methods": {
            "Local SGD": {"algorithm": {"name": "fedavg", "lr": 0.1, "weight_decay": 1.0e-3}},
            "FedAdamW": {"algorithm": {"name": "fedadamw", "alpha": 0.5}},
        },
        "seeds": [0, 1],
        "metrics": ["test_acc", "train_loss", "comm"],
        "presets": {"quick": {"fl.rounds": 2}},
    }


@pytest.fixture
def tiny_table_path(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_table_data(), sort_keys=False))
    return path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `cuda` need a CUDA device: skipped without one (`make gpu-check` runs them)."""
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (make gpu-check runs it on a GPU)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def fresh_process(request: pytest.FixtureRequest) -> bool:
    """True when this test already ran, and passed, in a fresh pytest process: a test that trains
    with client processes (fedbench.engine.client_pool) cannot run in a process in which a
    compiled step ran (another test module's), since torch refuses gradients in a process forked
    from it (fedbench.engine.layout.fork_problem). Such a test starts with
    `if fresh_process: return`."""
    import subprocess

    from fedbench.engine.layout import fork_problem

    if fork_problem() is None:
        return False
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", request.node.nodeid],
        env=cli_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"in a fresh process:\n{done.stdout[-4000:]}"
    return True
