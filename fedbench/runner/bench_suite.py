"""`fedbench bench --suite table1`: the Table 1 shapes on whatever device is present.

Each row is one `fedbench bench --json` run in a fresh process (so that a CPU's peak RSS is the
row's own): a workload (ResNet-18 BN, ViT-Tiny) x an engine (sequential, vectorized) x a
precision (fp32 on a CPU; fp32, tf32 and bf16 on a GPU), FedAdamW on CIFAR-sized random data
(3x32x32, 100 classes, no augmentation) at FedAdamW Table 1's federation: 100 clients, S 10,
K 50, B 50. `--set` overrides apply to every row (a scaled-down CPU run: fewer local steps or
clients; the file records them).

The projection is the time Table 1 would take at the measured speed, never a FLOP count:
160 runs x 300 rounds x 10 clients x 50 steps = 24M client steps, half of them per model,
    hours = sum over the two models of 12M / (that model's client steps/s) / 3600.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from fedbench.errors import FedbenchError
from fedbench.files import temporary_folder, write_json

#: Extra seconds a compiled row may take over `--row-timeout`: compiling ResNet-18's or
#: ViT-Tiny's whole step took about 75 s on an H200 (a row: 89 and 91 s wall, 2026-11-27).
COMPILE_ALLOWANCE_S = 75.0
#: Client steps of FedAdamW Table 1: 8 methods x 2 models x 2 splits x 5 seeds = 160 runs.
TABLE1_CLIENT_STEPS = 160 * 300 * 10 * 50
WORKLOADS = {
    "resnet18_bn": {"name": "resnet18", "norm": "bn"},
    "vit_tiny": {"name": "vit_tiny"},
}
ENGINES = ("sequential", "vectorized")
SUITES = ("table1",)


def table1_config(npz_path: Path, model: dict[str, Any]) -> dict[str, Any]:
    return {
        "seed": 0,
        "data": {"name": "npz", "path": str(npz_path)},
        "partition": {"kind": "dirichlet", "alpha": 0.6, "clients": 100},
        "model": model,
        "fl": {"rounds": 300, "participation": 0.1, "local_steps": 50, "batch_size": 50},
        "algorithm": {"name": "fedadamw", "lr": 3.0e-4, "weight_decay": 0.01, "alpha": 0.5},
    }


def write_random_cifar(path: Path, n_train: int = 10000, n_test: int = 1000) -> None:
    """CIFAR-sized random data: 3x32x32 standard-normal images, 100 classes (float16 on disk)."""
    rng = np.random.default_rng(0)
    np.savez(
        path,
        x_train=rng.standard_normal((n_train, 3, 32, 32), dtype=np.float32).astype(np.float16),
        y_train=rng.integers(0, 100, n_train),
        x_test=rng.standard_normal((n_test, 3, 32, 32), dtype=np.float32).astype(np.float16),
        y_test=np.arange(n_test) % 100,
    )


def device_name(device: torch.device) -> str:
    """The accelerator's (or the CPU's) marketing name."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return "CPU " + line.split(":", 1)[1].strip()
    return f"CPU {platform.processor() or platform.machine()}"


def slug(name: str) -> str:
    """A file-name-safe lower-case form: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def variants(device: torch.device) -> list[tuple[str, str, bool, str]]:
    """The (engine, precision, compile, cuda_graphs) rows of a suite on `device`, most wanted
    first; cuda_graphs is the row's `runtime.cuda_graphs` (auto: the run's own choice).

    On CUDA: sequential fp32 (the exact baseline), the vectorised (stacked clients) engine in
    bf16 with its whole stacked step replayed as a CUDA graph (fedbench.engine.graphed: the path
    to Table 1 in <= 4 H100-hours, not yet measured on a GPU), sequential bf16 (eager steps with
    the forward + backward replayed as CUDA graphs) and the vectorised engine in bf16 with eager
    steps (graphs off). The order matters when a time limit cuts the suite short: both models of
    a variant run before the next variant starts. Left out, as measured on an H200 on
    2026-11-26: TF32 (between fp32 and bf16: 255 vs 106 and 298 client steps/s for ResNet-18
    BN), vectorised fp32 (65 and 66, the slowest row), the compiled whole step in bf16 (73 and
    83 client steps/s for ResNet-18 BN and ViT-Tiny after ~75 s of compiling: slower than the
    eager step it compiles, and four variants fill the bench part's time) and the compiled
    vectorised step (its compilation alone outlasted a 45 s row). On a CPU bf16 and
    TF32 only measure emulation, and compiling a paper-size model takes minutes: both engines
    in fp32 (graphs are CUDA-only)."""
    if device.type == "cuda":
        return [
            ("sequential", "fp32", False, "auto"),
            ("vectorized", "bf16", False, "on"),
            ("sequential", "bf16", False, "auto"),
            ("vectorized", "bf16", False, "off"),
        ]
    return [(engine, "fp32", False, "auto") for engine in ENGINES]


def variant_key(engine: str, precision: str, compiled: bool, graphs: str = "auto") -> str:
    """A row's name in the projection: engine/precision, +compile when compiled, +graphs when
    its step graphs were asked for (`runtime.cuda_graphs on`)."""
    return (
        f"{engine}/{precision}"
        + ("+compile" if compiled else "")
        + ("+graphs" if graphs == "on" else "")
    )


def projection(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Projected Table 1 hours per (engine, precision) and with each model's fastest variant."""

    def hours(rates: dict[str, float]) -> float:
        per_model = TABLE1_CLIENT_STEPS / len(WORKLOADS)
        return round(sum(per_model / s / 3600 for s in rates.values()), 2)

    rate: dict[str, dict[str, float]] = {}
    rows = [r for r in rows if "error" not in r]
    for r in rows:
        graphs = str(r.get("cuda_graphs_requested", "auto"))
        key = variant_key(r["engine_requested"], r["precision"], bool(r.get("compile")), graphs)
        rate.setdefault(key, {})[r["workload"]] = r["client_steps_per_s"]
    out: dict[str, Any] = {}
    for key, by_model in rate.items():
        if len(by_model) == len(WORKLOADS):
            out[key] = hours(by_model)
    if all(w in {r["workload"] for r in rows} for w in WORKLOADS):
        best = {
            w: max(r["client_steps_per_s"] for r in rows if r["workload"] == w) for w in WORKLOADS
        }
        out["best_per_model"] = hours(best)
    return out


def _row(
    config: Path,
    engine: str,
    precision: str,
    compiled: bool,
    sets: list[str],
    options: list[str],
    timeout_s: float | None = None,
    graphs: str = "auto",
) -> dict[str, Any]:
    """One row in a fresh process; a failure or a time-out comes back as {"error": ...}."""
    from fedbench import plugins

    # The row's process loads this one's plugins (a --set may name a plugin's algorithm).
    cmd = [sys.executable, "-m", "fedbench", *plugins.command_line(), "bench", str(config)]
    cmd += ["--json", *options]
    runtime = [f"runtime.engine={engine}", f"runtime.precision={precision}"]
    runtime += [f"runtime.compile={str(compiled).lower()}"]
    if graphs != "auto":
        runtime += [f"runtime.cuda_graphs={graphs}"]
    for item in (*runtime, *sets):
        cmd += ["--set", item]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:g} s", "precision": precision}
    if proc.returncode != 0:
        lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit code {proc.returncode}"
        return {"error": last[-300:], "precision": precision}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _header(
    suite: str, device: torch.device, threads: int | None, sets: list[str], rounds: int
) -> dict[str, Any]:
    """What a suite's file says about where and how it was measured."""
    # Other jobs on the CPU slow every row down: such figures would mislead each estimate made
    # from them (fedbench.runner.estimate reads no file marked unrepresentative).
    load = os.getloadavg()[0]
    cores = os.cpu_count() or 1
    busy = device.type == "cpu" and load > cores
    return {
        "suite": suite,
        "device": device_name(device),
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "device_type": device.type,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cpu_threads": torch.get_num_threads() if threads is None else threads,
        "overrides": sets,
        "scaled_down": bool(sets),
        "load_average": round(load, 2),
        "representative": not busy,
        **(
            {"note": f"measured at load average {load:.1f} on {cores} cores: not representative"}
            if busy
            else {}
        ),
        "timed_rounds": rounds,
        "table1_client_steps": TABLE1_CLIENT_STEPS,
    }


def _measured(
    workload: str,
    engine: str,
    precision: str,
    compiled: bool,
    row: dict[str, Any],
    graphs: str = "auto",
) -> tuple[dict[str, Any], str]:
    """The row with its names and ms/step added, and its log line."""
    row.update(
        workload=workload, engine_requested=engine, compile=compiled, cuda_graphs_requested=graphs
    )
    key = f"{workload} {variant_key(engine, precision, compiled, graphs)}"
    if "error" in row:
        return row, f"{key}: {row['error']}"
    row["ms_per_client_step"] = 1000.0 / row["client_steps_per_s"]
    speed = f"{row['client_steps_per_s']:.2f} client steps/s"
    return row, f"{key}: {speed}, engine peak {row['engine_peak_mem_mb']:.0f} MB"


def run_suite(
    suite: str,
    *,
    sets: list[str],
    rounds: int,
    warmup: int,
    repeats: int,
    threads: int | None,
    out_dir: Path,
    log: Any = None,
    row_timeout_s: float | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Run every row of `suite`; write out_dir/<device>.json and return (path, contents).

    A row that fails or outlasts `row_timeout_s` (a compiled row: that plus
    COMPILE_ALLOWANCE_S) is recorded with its error and the suite goes
    on; the file is rewritten after every row (`complete: false` until the last), so a suite
    killed from outside keeps what it measured."""
    if suite not in SUITES:
        raise FedbenchError(f"--suite {suite!r} is not a suite; use one of {', '.join(SUITES)}")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    options = ["--rounds", str(rounds), "--warmup", str(warmup), "--repeats", str(repeats)]
    if threads is not None:
        options += ["--threads", str(threads)]
    header = _header(suite, device, threads, sets, rounds)
    path = out_dir / f"{slug(header['device'])}.json"
    out_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with temporary_folder("fedbench-suite-") as tmp:
        npz_path = tmp / "cifar_random.npz"
        write_random_cifar(npz_path)
        configs = {w: tmp / f"{w}.yaml" for w in WORKLOADS}
        for workload, model in WORKLOADS.items():
            configs[workload].write_text(yaml.safe_dump(table1_config(npz_path, model)))
        # Variant-major: both models of a variant before the next one, so a suite cut short
        # still projects every variant it finished.
        for engine, precision, compiled, graphs in variants(device):
            for workload in WORKLOADS:
                limit = row_timeout_s
                if limit is not None and compiled:
                    limit += COMPILE_ALLOWANCE_S
                config = configs[workload]
                raw = _row(config, engine, precision, compiled, sets, options, limit, graphs)
                row, line = _measured(workload, engine, precision, compiled, raw, graphs)
                rows.append(row)
                if log is not None:
                    log(line)
                partial = {**header, "complete": False, "rows": rows}
                write_json(path, {**partial, "projected_table1_hours": projection(rows)})
    result = {**header, "complete": True, "rows": rows, "projected_table1_hours": projection(rows)}
    write_json(path, result)  # atomic: a full disk keeps the previous results
    return path, result


def measure(
    config: Path | None,
    overrides: list[str],
    *,
    rounds: int,
    warmup: int,
    repeats: int,
    threads: int | None,
    suite: str | None,
    out_dir: Path,
    log: Any = None,
    row_timeout_s: float | None = None,
) -> tuple[dict[str, Any], Path | None]:
    """`fedbench bench`: one workload (CONFIG, or the defaults, with `overrides`), or with
    `suite` every row of that suite written to out_dir/<device>.json; returns the result and
    the file written (None for one workload)."""
    if suite is not None:
        if config is not None:
            raise FedbenchError("--suite runs its own configs; drop CONFIG (use --set to scale)")
        path, result = run_suite(
            suite,
            sets=overrides,
            rounds=rounds,
            warmup=warmup,
            repeats=repeats,
            threads=threads,
            out_dir=out_dir,
            log=log,
            row_timeout_s=row_timeout_s,
        )
        return result, path
    from fedbench.config import load_run_config
    from fedbench.engine.bench import run_bench
    from fedbench.threads import threads_for_run

    # As a run chooses them (runtime.threads, else the execution plan's choice, which the
    # engine puts in place); --threads is runtime.threads.
    extra = [] if threads is None else [f"runtime.threads={threads}"]
    cfg = load_run_config(config, [*overrides, *extra])
    threads_for_run(cfg.runtime.threads)
    return run_bench(cfg, rounds=rounds, warmup=warmup, repeats=repeats), None
