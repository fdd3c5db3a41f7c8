"""The Ray launcher against a real Ray cluster started on loopback inside the test, and its
command-line errors (no Ray installed, options that belong to the other launcher)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from fedbench.report import build_report
from fedbench.runner.ray_launcher import capacity, task_resources
from fedbench.runner.sweep import run_sweep
from fedbench.runner.table_config import expand, parse_table_config
from tests.conftest import read_metrics, strip_elapsed, tiny_table_data


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def ray_cli() -> list[str]:
    beside = Path(sys.executable).with_name("ray")
    return [str(beside)] if beside.is_file() else [sys.executable, "-m", "ray.scripts.scripts"]


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[str]:
    """A one-node Ray cluster on 127.0.0.1 with 2 CPUs; its address. Its processes form one
    process group (a new session), and only that group is stopped afterwards: other Ray
    clusters on the machine are left alone."""
    ray = pytest.importorskip("ray")
    temp = Path(tempfile.mkdtemp(prefix="fbray", dir="/tmp"))  # unix sockets: keep paths short
    port, client_port, agent_port = free_ports(3)
    start = subprocess.Popen(
        [
            *ray_cli(),
            "start",
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={port}",
            f"--ray-client-server-port={client_port}",
            f"--dashboard-agent-listen-port={agent_port}",
            "--num-cpus=2",
            "--object-store-memory=100000000",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    log, _ = start.communicate(timeout=180)
    try:
        assert start.returncode == 0, log
        yield f"127.0.0.1:{port}"
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(start.pid, sig)
            except ProcessLookupError:
                break
            time.sleep(3)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
def test_a_table_on_ray_equals_the_local_launcher(
    ray_cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    plan = expand(parse_table_config(tiny_table_data()))
    # A Ray task with 1 CPU trains with 1 thread: so does the local reference. Its worker reads
    # the thread count from its environment (the test session's OMP_NUM_THREADS is the cores'),
    # not from this process' torch; at 2 threads a test loss differed in its last digits.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with monkeypatch.context() as env:
            env.setenv("OMP_NUM_THREADS", "1")
            local = run_sweep(plan, tmp_path / "local", workers=1)
    finally:
        torch.set_num_threads(threads)
    on_ray = run_sweep(plan, tmp_path / "ray", launcher="ray", ray_address=ray_cluster)

    assert {o.status for o in on_ray.outcomes.values()} == {"completed"}
    assert all(o.node for o in on_ray.outcomes.values())  # ran as Ray tasks
    assert on_ray.outcomes.keys() == local.outcomes.keys()
    for run_id in local.outcomes:
        ours = strip_elapsed(read_metrics(tmp_path / "ray" / "runs" / run_id))
        assert ours == strip_elapsed(read_metrics(tmp_path / "local" / "runs" / run_id))
    columns = ["method", "metric", "mean", "std", "n"]
    local_summary = build_report(local.folder).summary[columns]
    ray_summary = build_report(on_ray.folder).summary[columns]
    assert ray_summary.equals(local_summary)
    assert not list((tmp_path / "ray").glob(".fedbench-ray-probe*"))  # the shared-storage probe
    assert {r["status"] for r in json.loads((on_ray.folder / "plan.json").read_text())["runs"]} == {
        "completed"
    }


def test_task_resources_and_cluster_capacity():
    data = tiny_table_data()
    data["base"]["runtime"].update(runs_per_gpu=4, cpus_per_run=2)
    run = expand(parse_table_config(data)).runs[0]
    assert task_resources(run, cluster_gpus=8) == (2, 0.25)  # 4 runs share a GPU
    assert task_resources(run, cluster_gpus=0) == (2, 0.0)
    assert capacity({"CPU": 16, "GPU": 2}, 2, 0.25) == 8
    assert capacity({"CPU": 16, "GPU": 8}, 2, 0.25) == 8  # CPUs bound it
    assert capacity({"CPU": 1}, 2, 0.0) == 1


def test_launcher_ray_without_ray_prints_the_install_hint(
    run_cli, tiny_table_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    out = tmp_path / "out"
    code, _, err = run_cli("run", str(tiny_table_path), "--out", str(out), "--launcher", "ray")
    assert code == 2
    assert (
        err.strip()
        == "error: --launcher ray needs Ray; install it with: pip install 'fedbench[ray]'"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ray-address", "127.0.0.1:1"], "--ray-address needs --launcher ray"),
        (["--launcher", "ray", "--workers", "2"], "--workers is for the local launcher"),
        (["--launcher", "slurm"], "unknown --launcher 'slurm'"),
    ],
)
def test_launcher_options_that_do_not_fit(run_cli, tiny_table_path, tmp_path, args, message):
    code, _, err = run_cli("run", str(tiny_table_path), "--out", str(tmp_path / "o"), *args)
    assert code == 2 and message in err
    assert not (tmp_path / "o").exists()
