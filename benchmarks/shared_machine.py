"""fedbench's speed on a machine that other jobs share (docs/performance.md, "Threads").

Runs the Flower anchor's workload (digits CNN, 20 clients, 5 a round, 20 SGD steps of batch 32:
FedAvg) with `fedbench bench --json`, each variant in a fresh process, `--cycles` times
interleaved (the best is kept, as `fedbench bench` keeps its best repeat), in two conditions: as
the machine is
("quiet": no load of ours), and under a synthetic competing load of N busy-loop processes
(default: one per core), started `--settle` seconds before the first loaded measurement so that
the 1-minute load average fedbench reads has risen (the loops end by themselves after a bounded
time, and are killed at the end in any case). Variants:

- `fedbench`: fedbench's own choice (runtime.threads auto, OMP_WAIT_POLICY=PASSIVE);
- `1 thread`: `--threads 1` (the setting to beat);
- `all cores, spinning`: `--threads <cores>` with OpenMP's default wait policy (what fedbench did
  before: torch's default thread count, OpenMP threads spinning while they wait).

It prints, and writes as JSON and Markdown (`--json`, `--markdown`), client steps/s per variant
and condition, the load average at each measurement, fedbench's loaded / quiet speed and
fedbench / one thread under load. The targets: within 1.5x of quiet, never slower than one thread.

    python benchmarks/shared_machine.py [--busy N] [--settle 60] [--rounds 3] [--cycles 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = """\
seed: 0
data: {name: digits}
partition: {kind: dirichlet, alpha: 0.6, clients: 20}
model: {name: cnn}
fl: {rounds: 30, participation: 0.25, local_steps: 20, batch_size: 32}
algorithm: {name: fedavg}
"""
#: An OMP_WAIT_POLICY value libgomp does not know: it warns once and keeps its default policy,
#: while fedbench leaves a value set by the user alone (so this reproduces the old behaviour).
OPENMP_DEFAULT = "default"
SPINNING = "all cores, spinning"


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def variants(n_cores: int) -> dict[str, tuple[list[str], dict[str, str]]]:
    """name -> (extra bench options, environment changes)."""
    return {
        "fedbench": ([], {}),
        "1 thread": (["--threads", "1"], {}),
        SPINNING: (["--threads", str(n_cores)], {"OMP_WAIT_POLICY": OPENMP_DEFAULT}),
    }


def bench(config: Path, options: list[str], env: dict[str, str], args: Any) -> dict[str, Any]:
    command = [
        sys.executable,
        "-m",
        "fedbench",
        "bench",
        str(config),
        "--json",
        "--rounds",
        str(args.rounds),
        "--warmup",
        "1",
        "--repeats",
        str(args.repeats),
        *options,
    ]
    environ = {
        k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")
    }
    environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), environ.get("PYTHONPATH")) if p)
    environ.update(env)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, env=environ, timeout=args.timeout
        )
    except subprocess.TimeoutExpired:  # the collapse this script looks for: a row, not a crash
        return {
            "client_steps_per_s": 0.0,
            "timed_out_s": args.timeout,
            "threads": options[-1] if options else "auto",
            "load_before": round(load, 2),
            "omp_wait_policy": env.get("OMP_WAIT_POLICY", "?"),
        }
    if done.returncode != 0:
        raise SystemExit(f"bench failed: {done.stderr.strip()[-800:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["load_before"] = round(load, 2)
    result["load_after"] = round(os.getloadavg()[0], 2)
    result["process_s"] = round(time.perf_counter() - t0, 1)
    return result


def busy_loops(n: int, seconds: float) -> list[subprocess.Popen[bytes]]:
    """N processes that spin for at most `seconds` (bounded even if this script is killed)."""
    loop = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(n)]


def _condition(
    label: str, config: Path, table: dict[str, Any], args: Any, rows: list[dict[str, Any]]
) -> None:
    """`args.cycles` rounds of every variant, interleaved (a load that changes meanwhile hits
    them all); the spinning variant once (it is the slow one)."""
    for cycle in range(args.cycles):
        for name, (options, env) in table.items():
            if name == SPINNING and cycle > 0:
                continue
            row = bench(config, options, env, args)
            rows.append({"condition": label, "variant": name, "cycle": cycle, **row})
            print(
                f"{label:14} {name:22} {_speed(row):>24} client steps/s "
                f"({row['threads']} threads; load {row['load_before']})",
                flush=True,
            )


def best(rows: list[dict[str, Any]], condition: str, variant: str) -> float:
    """The best speed of a variant over the cycles (as `fedbench bench` keeps its best repeat:
    the other jobs only ever slow a measurement down)."""
    return max(
        r["client_steps_per_s"]
        for r in rows
        if r["condition"] == condition and r["variant"] == variant
    )


def measure(args: Any) -> dict[str, Any]:
    n_cores = cores()
    busy = n_cores if args.busy is None else args.busy
    table = variants(n_cores)
    rows: list[dict[str, Any]] = []
    loaded_label = f"{busy} busy loops"
    with tempfile.TemporaryDirectory(prefix="fedbench-shared-") as tmp:
        config = Path(tmp) / "flower_anchor.yaml"
        config.write_text(WORKLOAD)
        _condition("quiet", config, table, args, rows)
        budget = args.settle + (len(table) * args.cycles + 1) * args.timeout
        loops = busy_loops(busy, budget)
        try:
            time.sleep(args.settle)
            _condition(loaded_label, config, table, args, rows)
        finally:
            for process in loops:
                process.kill()
                process.wait()
    speeds = {
        (condition, name): best(rows, condition, name)
        for condition in ("quiet", loaded_label)
        for name in table
    }
    quiet, loaded = speeds[("quiet", "fedbench")], speeds[(loaded_label, "fedbench")]
    one = speeds[(loaded_label, "1 thread")]
    return {
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cores": n_cores,
        "busy_loops": busy,
        "settle_s": args.settle,
        "rounds": args.rounds,
        "repeats": args.repeats,
        "cycles": args.cycles,
        "rows": rows,
        "best": [
            {"condition": c, "variant": v, "client_steps_per_s": round(x, 1)}
            for (c, v), x in speeds.items()
        ],
        "quiet_over_loaded": round(quiet / loaded, 2),
        "loaded_vs_one_thread": round(loaded / one, 2),
        "within_1_5x_of_quiet": quiet / loaded <= 1.5,
        "not_slower_than_one_thread": loaded >= one,
    }


def _speed(row: dict[str, Any]) -> str:
    if "timed_out_s" in row:
        return f"timed out after {row['timed_out_s']:.0f} s"
    return f"{row['client_steps_per_s']:.1f}"


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Flower anchor workload (digits CNN, FedAvg, 20 clients, S 5, K 20, B 32), "
        f"{result['cores']} cores, {result['measured_at']}; loaded = {result['busy_loops']} "
        f"busy loops started {result['settle_s']} s earlier. `quiet` is the machine as it was "
        "(other jobs included: see the load).",
        "",
        "| condition | variant | threads | client steps/s | load average | wait policy |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['condition']} | {row['variant']} | {row['threads']} | "
            f"{_speed(row)} | {row['load_before']} | "
            f"{row.get('omp_wait_policy', '?')} |"
        )
    lines += ["", "Best of the cycles:", "", "| condition | variant | client steps/s |"]
    lines += ["| --- | --- | --- |"]
    lines += [
        f"| {b['condition']} | {b['variant']} | "
        f"{b['client_steps_per_s'] or 'every try timed out'} |"
        for b in result["best"]
    ]
    lines += [
        "",
        f"fedbench quiet / loaded: {result['quiet_over_loaded']}x (target <= 1.5x); "
        f"fedbench / one thread under load: {result['loaded_vs_one_thread']}x (target >= 1).",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=None, help="busy loops (default: one per core)")
    parser.add_argument(
        "--settle", type=float, default=60.0, help="seconds of load before measuring"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--cycles", type=int, default=3, help="interleaved measurements of each variant"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per bench process")
    parser.add_argument(
        "--json", type=Path, default=ROOT / "benchmarks/results/shared-machine.json"
    )
    parser.add_argument(
        "--markdown", type=Path, default=ROOT / "benchmarks/results/shared-machine.md"
    )
    args = parser.parse_args()
    result = measure(args)
    text = markdown(result)
    print(text, end="")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    args.markdown.write_text(text)


if __name__ == "__main__":
    main()
