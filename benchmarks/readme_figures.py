"""The figures README.md and configs/demo.yaml state, measured on this machine:
`python benchmarks/readme_figures.py [--repeats 2] [--suite]`.

Run from the repository root. It times, as a user runs them (fresh processes, results in a
temporary folder):

- `fedbench train --set data.name=digits --set algorithm.name=fedadamw` (README, Quick start),
- `fedbench train configs/demo.yaml` (configs/demo.yaml's header),
- the number of tests `pytest --collect-only -q` collects (README, `make test`),
- with --suite, `python -m pytest -q` itself (the whole suite; minutes).

It names the machine (CPU, cores, the load average before and after: the machine may be shared)
and prints the lines to put in README.md; the figures go to benchmarks/results/readme_figures.json
(a new entry per run, so that repeated runs give a range).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results" / "readme_figures.json"

TRAIN_DEFAULT = ["train", "--set", "data.name=digits", "--set", "algorithm.name=fedadamw"]
TRAIN_DEMO = ["train", "configs/demo.yaml"]


def machine() -> dict[str, object]:
    cpu = "unknown CPU"
    info = Path("/proc/cpuinfo")
    if info.is_file():
        for line in info.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"cpu": cpu, "cores": os.cpu_count(), "load_before": os.getloadavg()[0]}


def wall(cmd: list[str]) -> float:
    """Seconds one command takes in a fresh process (it must succeed)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
    return time.perf_counter() - start


def fedbench(args: list[str], repeats: int) -> list[float]:
    """Wall seconds of `fedbench ARGS` `repeats` times, each into a fresh --out (no resume)."""
    times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="fedbench-figures-") as out:
            times.append(wall([sys.executable, "-m", "fedbench", *args, "--out", out]))
    return times


def collected_tests() -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"(\d+) tests? collected", proc.stdout)
    if found is None:
        raise SystemExit(f"could not read the test count from pytest:\n{proc.stdout[-500:]}")
    return int(found.group(1))


def span(values: list[float], unit: str = "s") -> str:
    low, high = min(values), max(values)
    if unit == "min":
        low, high = low / 60, high / 60
        return f"{low:.1f}" if round(low, 1) == round(high, 1) else f"{low:.1f}-{high:.1f}"
    return f"{low:.0f}" if round(low) == round(high) else f"{low:.0f}-{high:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="times each train command runs")
    parser.add_argument("--suite", action="store_true", help="also time the whole test suite")
    args = parser.parse_args()

    entry: dict[str, object] = {"measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    entry.update(machine())
    entry["train_default_s"] = fedbench(TRAIN_DEFAULT, args.repeats)
    entry["train_demo_s"] = fedbench(TRAIN_DEMO, args.repeats)
    entry["tests_collected"] = collected_tests()
    if args.suite:
        entry["suite_s"] = [wall([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"])]
    entry["load_after"] = os.getloadavg()[0]

    history = json.loads(RESULTS.read_text()) if RESULTS.is_file() else []
    history.append(entry)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(history, indent=2) + "\n")

    where = (
        f"{entry['cores']}-core {entry['cpu']}, load average "
        f"{entry['load_before']:.1f} -> {entry['load_after']:.1f}"
    )
    print(f"measured {entry['measured_at']} on a {where} ({RESULTS.relative_to(ROOT)}):")
    print(f"  fedbench train (digits, fedadamw defaults): {span(entry['train_default_s'])} s")
    print(f"  fedbench train configs/demo.yaml:           {span(entry['train_demo_s'])} s")
    print(f"  tests collected:                            {entry['tests_collected']}")
    if "suite_s" in entry:
        print(f"  pytest -q (the whole suite):                {span(entry['suite_s'], 'min')} min")
    print("over every entry in the file (the ranges README states):")
    for key, label in (
        ("train_default_s", "train defaults"),
        ("train_demo_s", "train demo.yaml"),
    ):
        values = [v for e in history for v in e.get(key, [])]
        print(f"  {label}: {span(values)} s")
    suites = [v for e in history for v in e.get("suite_s", [])]
    if suites:
        print(f"  pytest -q: {span(suites, 'min')} min")


if __name__ == "__main__":
    main()
