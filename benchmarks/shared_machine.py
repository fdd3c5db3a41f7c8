"""fedbench's speed on a machine that other jobs share (docs/performance.md, "Threads" and "CPU
layout").

Runs the peers' workload (benchmarks/peers/workload.yaml: digits CNN, 20 IID clients, 5 a
round, 20 SGD steps of batch 32, FedAvg) with `fedbench bench --json`, each variant in a fresh
process, `--cycles` times interleaved (the best is kept, as `fedbench bench` keeps its best
repeat), in two conditions: as the machine is ("quiet": no load of ours), and under a synthetic
competing load of N busy-loop processes (default: one per core), started `--settle` seconds
before the first loaded measurement so that the 1-minute load average fedbench reads has risen
(the loops end by themselves after a bounded time, and are killed at the end in any case).
Variants: fedbench's default (the execution plan's threads, wait policy, client processes
and executor) against every explicit setting (`variants`): threads 1 or every core, OpenMP
waiting passively or actively (spinning) where a process has several threads, client
processes 1 or one per core, and the sequential or the vectorised executor (a round's clients
stacked into one model on the CPU: not bitwise the sequential results, so never the default
of an existing configuration; measured to say what it would give).

It prints, and writes as JSON and Markdown (`--json`, `--markdown`), client steps/s per variant
and condition, the load average at each measurement, fedbench's loaded / quiet speed, and the
default against the best explicit setting in each condition. The targets: within 1.5x of quiet,
within 10% of the best explicit setting.

    python benchmarks/shared_machine.py [--busy N] [--settle 60] [--rounds 10] [--cycles 3]
        [--only quiet|loaded] [--variants vectorised,processes]
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

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "benchmarks/peers/workload.yaml"
DEFAULT = "default"


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def round_clients() -> int:
    """The clients of one round of the workload (participation x clients)."""
    import yaml

    cfg = yaml.safe_load(WORKLOAD.read_text())
    return max(1, round(cfg["fl"]["participation"] * cfg["partition"]["clients"]))


def variants(n_cores: int) -> dict[str, tuple[list[str], dict[str, str]]]:
    """name -> (extra bench options, environment changes): the default, then every explicit
    setting of threads (1, the cores), OpenMP wait policy (passive, active: where threads > 1),
    client processes (1, the cores) and executor (sequential, vectorised)."""
    n = n_cores

    def setting(threads: int, processes: int, engine: str = "sequential") -> list[str]:
        return [
            "--threads",
            str(threads),
            "--set",
            f"runtime.client_processes={processes}",
            "--set",
            f"runtime.engine={engine}",
        ]

    passive, active = {"OMP_WAIT_POLICY": "PASSIVE"}, {"OMP_WAIT_POLICY": "ACTIVE"}
    found: dict[str, tuple[list[str], dict[str, str]]] = {
        DEFAULT: ([], {}),
        "1 process x 1 thread": (setting(1, 1), {}),
    }
    if n > 1:
        found[f"1 process x {n} threads, passive"] = (setting(n, 1), passive)
        found[f"1 process x {n} threads, active"] = (setting(n, 1), active)
        found[f"{n} processes x 1 thread"] = (setting(1, n), {})
        # One more process than cores: where a round's clients do not split evenly over the
        # cores (5 on 2), the plan's balanced count (fedbench.engine.layout.balanced_processes).
        found[f"{n + 1} processes x 1 thread"] = (setting(1, n + 1), {})
        # One process per client of a round: the largest share of a shared machine's cores a
        # run can hold (p processes beside b busy loops get p / (p + b) of them).
        per_client = round_clients()
        if per_client > n + 1:
            found[f"{per_client} processes x 1 thread"] = (setting(1, per_client), {})
    found["vectorised, 1 thread"] = (setting(1, 1, "vectorized"), {})
    if n > 1:
        found[f"vectorised, {n} threads, passive"] = (setting(n, 1, "vectorized"), passive)
        found[f"vectorised, {n} threads, active"] = (setting(n, 1, "vectorized"), active)
    return found


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
        "2",
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
            "load_before": round(load, 2),
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


def layout(row: dict[str, Any]) -> str:
    """What ran: '2 processes x 1 thread, PASSIVE, sequential'."""
    if "timed_out_s" in row:
        return "-"
    processes, threads = row.get("client_processes", "?"), row.get("threads", "?")
    policy = str(row.get("omp_wait_policy", "?")).split(" ")[0]
    return (
        f"{processes} process{'es' if processes != 1 else ''} x {threads} "
        f"thread{'s' if threads != 1 else ''}, {policy}, {row.get('engine', '?')}"
    )


def _condition(
    label: str, config: Path, table: dict[str, Any], args: Any, rows: list[dict[str, Any]]
) -> None:
    """`args.cycles` rounds of every variant, interleaved (a load that changes meanwhile hits
    them all)."""
    for cycle in range(args.cycles):
        for name, (options, env) in table.items():
            row = bench(config, options, env, args)
            rows.append({"condition": label, "variant": name, "cycle": cycle, **row})
            print(
                f"{label:14} {name:30} {_speed(row):>24} client steps/s "
                f"({layout(row)}; load {row['load_before']})",
                flush=True,
            )


def speeds_of(rows: list[dict[str, Any]], condition: str, variant: str) -> list[float]:
    return [
        r["client_steps_per_s"]
        for r in rows
        if r["condition"] == condition and r["variant"] == variant
    ]


def measure(args: Any) -> dict[str, Any]:
    n_cores = cores()
    busy = n_cores if args.busy is None else args.busy
    table = variants(n_cores)
    if args.variants:
        keep = [w.strip().lower() for w in args.variants.split(",")]
        table = {k: v for k, v in table.items() if k == DEFAULT or any(w in k for w in keep)}
    rows: list[dict[str, Any]] = []
    loaded_label = f"{busy} busy loops"
    conditions = []
    if args.only != "loaded":
        _condition("quiet", WORKLOAD, table, args, rows)
        conditions.append("quiet")
    if args.only != "quiet":
        budget = args.settle + (len(table) * args.cycles + 1) * args.timeout
        loops = busy_loops(busy, budget)
        try:
            time.sleep(args.settle)
            _condition(loaded_label, WORKLOAD, table, args, rows)
        finally:
            for process in loops:
                process.kill()
                process.wait()
        conditions.append(loaded_label)
    summary = []
    for condition in conditions:
        for name in table:
            found = speeds_of(rows, condition, name)
            summary.append(
                {
                    "condition": condition,
                    "variant": name,
                    "best": round(max(found), 1),
                    "median": round(statistics.median(found), 1),
                    "min": round(min(found), 1),
                    "layout": next(
                        layout(r)
                        for r in rows
                        if r["condition"] == condition and r["variant"] == name
                    ),
                }
            )

    def best(condition: str, name: str) -> float:
        return max(speeds_of(rows, condition, name))

    explicit = [name for name in table if name != DEFAULT]
    against = {
        c: round(best(c, DEFAULT) / max(best(c, n) for n in explicit), 2) for c in conditions
    }
    result: dict[str, Any] = {
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "cores": n_cores,
        "busy_loops": busy,
        "settle_s": args.settle,
        "rounds": args.rounds,
        "repeats": args.repeats,
        "cycles": args.cycles,
        "rows": rows,
        "summary": summary,
        # the default / the best explicit setting, per condition (target: >= 0.9)
        "default_vs_best_explicit": against,
        "within_10_percent_of_best": all(v >= 0.9 for v in against.values()),
    }
    if len(conditions) == 2:
        quiet, loaded = best("quiet", DEFAULT), best(loaded_label, DEFAULT)
        result["quiet_over_loaded"] = round(quiet / loaded, 2) if loaded else None
        result["within_1_5x_of_quiet"] = bool(loaded) and quiet / loaded <= 1.5
    return result


def _speed(row: dict[str, Any]) -> str:
    if "timed_out_s" in row:
        return f"timed out after {row['timed_out_s']:.0f} s"
    return f"{row['client_steps_per_s']:.1f}"


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"The peers' workload (digits CNN, FedAvg, 20 IID clients, S 5, K 20, B 32), "
        f"{result['cores']} cores, {result['measured_at']}, {result['cycles']} interleaved "
        f"cycles; loaded = {result['busy_loops']} busy loops started {result['settle_s']} s "
        "earlier. `quiet` is the machine as it was (other jobs included: see the load).",
        "",
        "| condition | variant | what ran | best | median | min | load average |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for b in result["summary"]:
        loads = [
            r["load_before"]
            for r in result["rows"]
            if r["condition"] == b["condition"] and r["variant"] == b["variant"]
        ]
        lines.append(
            f"| {b['condition']} | {b['variant']} | {b['layout']} | {b['best'] or 'timed out'} | "
            f"{b['median']} | {b['min']} | {min(loads):.2f}-{max(loads):.2f} |"
        )
    lines.append("")
    if "quiet_over_loaded" in result:
        lines.append(f"default quiet / loaded: {result['quiet_over_loaded']}x (target <= 1.5x).")
    lines.append(
        "the default / the best explicit setting (best of the cycles): "
        + ", ".join(f"{c} {v}x" for c, v in result["default_vs_best_explicit"].items())
        + " (target >= 0.9)."
    )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=None, help="busy loops (default: one per core)")
    parser.add_argument(
        "--settle", type=float, default=60.0, help="seconds of load before measuring"
    )
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--cycles", type=int, default=3, help="interleaved measurements of each variant"
    )
    parser.add_argument("--only", choices=("quiet", "loaded"), default=None)
    parser.add_argument(
        "--variants", default="", help="comma-separated name fragments to keep (and the default)"
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
