"""fedbench side by side with its peers on one workload, interleaved (docs/performance.md,
"Peers"): scikit-learn's digits as fedbench loads them, fedbench's `cnn` in every system, 20
IID clients (fedbench's partition), 5 a round, K 20 SGD steps of batch 32 at lr 0.05, FedAvg,
12 rounds of which rounds 3-12 are timed; client steps/s = 10 x 5 x 20 / their seconds.

Systems (each a fresh process, in its own virtualenv under the cache folder, made here on the
first run and reused; the virtualenvs see this interpreter's torch, so every system runs the
same torch build):

- fedbench's default (`fedbench bench`, the execution plan's threads and client processes),
  and fedbench at `runtime.threads=1`, `runtime.client_processes=1`;
- a bare PyTorch loop (benchmarks/peers/bare_loop.py), at 1 thread and at every core;
- pfl-research (`pip install "pfl[pytorch]"`, pfl_fedavg.py), one process at 1 thread, and
  one process of 1 thread per core (its multi-process mode, under torchrun);
- a Flower simulation (`pip install "flwr[simulation]"`, flower_fedavg.py), Ray, one actor.

Every repeat runs every system once, in turn (A B C A B C ...), so that a load that changes
meanwhile hits them all; the table gives the median, min and max of the repeats, the 1-minute
load average before each measurement, and the versions.

    python benchmarks/peers/run.py [--repeats 3] [--only fedbench,bare] [--cache DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORKLOAD = HERE / "workload.yaml"
#: name -> the requirement its virtualenv installs (None: this interpreter, fedbench's).
VENVS = {"pfl": "pfl[pytorch]==0.6.0", "flwr": "flwr[simulation]==1.42.0"}


def cache_dir(given: Path | None) -> Path:
    if given is not None:
        return given
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fedbench" / "peers"


def virtualenv(cache: Path, name: str) -> Path:
    """The python of `name`'s virtualenv, made (and its requirement installed) on first use;
    it sees this interpreter's site-packages after its own (a .pth file), for one torch build."""
    requirement = VENVS[name]
    home = cache / f"{name}-venv"
    python = home / "bin" / "python"
    marker = home / "fedbench-installed.txt"
    if marker.is_file() and marker.read_text().strip() == requirement:
        return python
    subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
    site = next((home / "lib").glob("python*/site-packages"))
    import torch

    shared = Path(torch.__file__).resolve().parents[1]
    (site / "zz-fedbench-torch.pth").write_text(f"{shared}\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", requirement], check=True)
    marker.write_text(requirement + "\n")
    return python


def write_data(path: Path) -> None:
    """The workload's training data and IID partition, as fedbench makes them."""
    import numpy as np

    from fedbench.config import load_run_config
    from fedbench.engine.setup import prepare_run

    setup = prepare_run(load_run_config(WORKLOAD, []))
    parts = {f"client_{i}": p for i, p in enumerate(setup.partition_arrays)}
    x, y = setup.data.x_train.numpy(), setup.data.y_train.numpy()
    np.savez(path, x=x, y=y, clients=len(setup.partition_arrays), **parts)


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), str(HERE)) if p)
    return env


def systems(cache: Path, data: Path, cores: int) -> dict[str, list[str]]:
    """name -> the command that prints the system's JSON line last."""
    bench = [sys.executable, "-m", "fedbench", "bench", str(WORKLOAD), "--json"]
    bench += ["--rounds", "10", "--warmup", "2", "--repeats", "1"]
    found = {
        "fedbench (default)": bench,
        "fedbench, 1 process x 1 thread": [
            *bench,
            "--threads",
            "1",
            "--set",
            "runtime.client_processes=1",
        ],
        "bare PyTorch loop, 1 thread": [sys.executable, str(HERE / "bare_loop.py"), str(data), "1"],
        f"bare PyTorch loop, {cores} threads": [
            sys.executable,
            str(HERE / "bare_loop.py"),
            str(data),
            str(cores),
        ],
    }
    pfl = virtualenv(cache, "pfl")
    found["pfl-research, 1 process x 1 thread"] = [
        str(pfl),
        str(HERE / "pfl_fedavg.py"),
        str(data),
        "1",
    ]
    # pfl's multi-process mode: torchrun starts one process per core, and each round's
    # clients are split over them.
    found[f"pfl-research, {cores} processes x 1 thread"] = [
        str(pfl),
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={cores}",
        str(HERE / "pfl_fedavg.py"),
        str(data),
        "1",
    ]
    flwr = virtualenv(cache, "flwr")
    found["Flower simulation (Ray), 1 actor x 1 thread"] = [
        str(flwr),
        str(HERE / "flower_fedavg.py"),
        str(data),
        "1",
    ]
    return found


def measure(command: list[str], timeout: float) -> dict[str, Any]:
    load = os.getloadavg()[0]
    done = subprocess.run(
        command, capture_output=True, text=True, env=_environment(), timeout=timeout, cwd=HERE
    )
    if done.returncode != 0:
        raise SystemExit(f"{command[1]} failed:\n{done.stderr[-1500:]}")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    row["load_before"] = round(load, 2)
    return row


def table(rows: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    out = []
    for name in names:
        mine = [r for r in rows if r["name"] == name]
        speeds = [r["client_steps_per_s"] for r in mine]
        loads = [r["load_before"] for r in mine]
        first = mine[0]
        out.append(
            {
                "system": name,
                "median": round(statistics.median(speeds), 1),
                "min": round(min(speeds), 1),
                "max": round(max(speeds), 1),
                "repeats": len(speeds),
                "load": f"{min(loads):.2f}-{max(loads):.2f}",
                "version": first.get("version") or f"fedbench {_fedbench_version()}",
                "layout": first.get("layout", ""),
            }
        )
    return out


def _fedbench_version() -> str:
    import fedbench

    return fedbench.__version__


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Measured {result['measured_at']} on {result['cores']} cores ({result['cpu']}), "
        f"torch {result['torch']}, {result['repeats']} interleaved repeats; client steps/s of "
        "rounds 3-12; load = the 1-minute load average before each measurement.",
        "",
        "| system | median | min | max | load | version |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in result["table"]:
        lines.append(
            f"| {row['system']}{' (' + row['layout'] + ')' if row['layout'] else ''} | "
            f"{row['median']} | {row['min']} | {row['max']} | {row['load']} | {row['version']} |"
        )
    return "\n".join(lines) + "\n"


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated name fragments to keep")
    parser.add_argument("--cache", type=Path, default=None)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per measurement")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/peers")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import torch

    cache = cache_dir(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    data = cache / "digits-iid20.npz"
    write_data(data)
    cores = len(os.sched_getaffinity(0))
    found = systems(cache, data, cores)
    if args.only:
        keep = [w.strip().lower() for w in args.only.split(",")]
        found = {k: v for k, v in found.items() if any(w in k.lower() for w in keep)}
    rows: list[dict[str, Any]] = []
    for repeat in range(args.repeats):
        for name, command in found.items():
            row = measure(command, args.timeout)
            if "client_processes" in row:  # fedbench bench
                row["layout"] = (
                    f"{row['client_processes']} process(es) x {row['threads']} thread(s)"
                )
            rows.append({"name": name, "repeat": repeat, **row})
            print(
                f"{name:48} {row['client_steps_per_s']:8.1f} client steps/s "
                f"(load {row['load_before']})",
                flush=True,
            )
    result = {
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cores": cores,
        "cpu": _cpu(),
        "torch": torch.__version__,
        "repeats": args.repeats,
        "rows": rows,
        "table": table(rows, list(found)),
    }
    text = markdown(result)
    print(text, end="")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(text)


if __name__ == "__main__":
    main()
