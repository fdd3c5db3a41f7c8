"""`make demo`'s time against what fedbench said it would take (docs/performance.md, "Estimates").

Per condition - the machine as it is ("quiet"), then beside N busy loops (default: one per
core, started `--settle` seconds before) - in a fresh output folder:

1. `fedbench run table1 --preset quick --estimate`: the probe's figure for the sweep (its
   "with the sweep's N workers" line, else its first line) and how long the probe took;
2. `fedbench run table1 --preset quick` (what `make demo` runs): its real time, and the ETA of
   its first progress line that gives one.

It prints one table: per condition the real time, each estimate and its ratio to the real time
(the target: within 1.5x either way), and the 1-minute load average before each command.

    python benchmarks/demo_estimate.py [--busy 2] [--settle 60] [--only quiet|loaded]
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEMO = ["run", "table1", "--preset", "quick"]
#: '2 min 18 s', '12 min', '40 s', '1.5 h' (fedbench.runner.estimate.duration).
DURATION = r"(\d[\d,.]*) (h|min|s)(?: (\d+) s)?"


def seconds_of(text: str) -> float:
    """The seconds of a duration as fedbench prints it."""
    found = re.fullmatch(DURATION, text.strip())
    if found is None:
        raise ValueError(f"not a duration: {text!r}")
    value, unit, extra = float(found[1].replace(",", "")), found[2], found[3]
    scale = {"h": 3600.0, "min": 60.0, "s": 1.0}[unit]
    return value * scale + (float(extra) if extra else 0.0)


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["COLUMNS"] = "400"  # one line per line: the pattern reads whole lines
    return env


def fedbench(args: list[str], out: Path) -> tuple[list[tuple[float, str]], float]:
    """Run `fedbench ARGS --out OUT`: its output lines with the seconds at which each came, and
    its wall time."""
    command = [sys.executable, "-m", "fedbench", *args, "--out", str(out)]
    start = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_environment(),
        cwd=ROOT,
    )
    assert process.stdout is not None
    lines = [(time.perf_counter() - start, line.rstrip()) for line in process.stdout]
    if process.wait() != 0:
        tail = "\n".join(line for _, line in lines[-20:])
        raise SystemExit(f"fedbench {' '.join(args)} failed:\n{tail}")
    return lines, time.perf_counter() - start


def estimate(out: Path) -> dict[str, Any]:
    """`--estimate`'s figure for the sweep, and the probe's own time."""
    load = os.getloadavg()[0]
    lines, wall = fedbench([*DEMO, "--estimate"], out)
    text = [line for _, line in lines]
    workers = [t for t in text if "with the sweep's" in t]
    if workers:
        found = re.search(r"workers: " + DURATION, workers[0])
    else:
        found = next(
            (m for t in text if (m := re.match(r"estimate: " + DURATION, t)) is not None), None
        )
    if found is None:
        raise SystemExit("--estimate printed no estimate:\n" + "\n".join(text[-20:]))
    return {
        "estimate_s": seconds_of(found.group(0).split(": ", 1)[1]),
        "probe_s": round(wall, 1),
        "load_before": round(load, 2),
        "lines": [
            t for t in text if t.startswith(("estimate", "  with", "  source", "  measured"))
        ],
    }


def demo(out: Path) -> dict[str, Any]:
    """The sweep `make demo` runs: its wall time and its first ETA (with when it came)."""
    load = os.getloadavg()[0]
    lines, wall = fedbench(DEMO, out)
    first = next(((t, line) for t, line in lines if re.search(r"; eta ", line)), None)
    row: dict[str, Any] = {"real_s": round(wall, 1), "load_before": round(load, 2)}
    row["load_after"] = round(os.getloadavg()[0], 2)
    if first is not None:
        at, line = first
        eta = seconds_of(re.search(r"; eta (.*)$", line).group(1))  # type: ignore[union-attr]
        row.update(first_eta_s=eta, first_eta_at_s=round(at, 1), first_eta_line=line)
        # What the line predicts for the whole sweep: the time so far and its ETA.
        row["first_eta_total_s"] = round(at + eta, 1)
    return row


def condition(label: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fedbench-demo-") as tmp:
        found = {"condition": label, **estimate(Path(tmp) / "estimate")}
        print(f"{label}: --estimate {found['estimate_s']:.0f} s", flush=True)
        found["demo"] = demo(Path(tmp) / "demo")
    real = found["demo"]["real_s"]
    found["estimate_over_real"] = round(found["estimate_s"] / real, 2)
    if "first_eta_total_s" in found["demo"]:
        found["first_eta_over_real"] = round(found["demo"]["first_eta_total_s"] / real, 2)
    print(f"{label}: real {real:.0f} s", flush=True)
    return found


def busy_loops(n: int, seconds: float) -> list[subprocess.Popen[bytes]]:
    """N processes that spin for at most `seconds` (bounded even if this script is killed)."""
    loop = f"import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(n)]


def markdown(rows: list[dict[str, Any]], busy: int) -> str:
    lines = [
        f"`make demo` (`fedbench {' '.join(DEMO)}`, 160 runs) on {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; loaded = {busy} busy loops. "
        "first eta = the time of the first progress line with an ETA plus that ETA.",
        "",
        "| condition | real | --estimate | estimate / real | first eta (at) | first eta / real "
        "| probe took | load before |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        d = row["demo"]
        eta = (
            f"{d['first_eta_total_s']:.0f} s ({d['first_eta_at_s']:.0f} s)"
            if "first_eta_total_s" in d
            else "none"
        )
        lines.append(
            f"| {row['condition']} | {d['real_s']:.0f} s | {row['estimate_s']:.0f} s | "
            f"{row['estimate_over_real']} | {eta} | {row.get('first_eta_over_real', '-')} | "
            f"{row['probe_s']:.0f} s | {row['load_before']} / {d['load_before']} |"
        )
    ok = all(
        1 / 1.5 <= r[k] <= 1.5
        for r in rows
        for k in ("estimate_over_real", "first_eta_over_real")
        if k in r
    )
    lines += ["", f"every estimate within 1.5x of the real time: {'yes' if ok else 'no'}"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=None, help="busy loops (default: one per core)")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds of load first")
    parser.add_argument("--only", choices=("quiet", "loaded"), default=None)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/demo-estimate.json")
    args = parser.parse_args()
    busy = len(os.sched_getaffinity(0)) if args.busy is None else args.busy
    rows = []
    if args.only != "loaded":
        rows.append(condition("quiet"))
    if args.only != "quiet":
        loops = busy_loops(busy, args.settle + 3600)
        try:
            time.sleep(args.settle)
            rows.append(condition(f"{busy} busy loops"))
        finally:
            for process in loops:
                process.kill()
                process.wait()
    text = markdown(rows, busy)
    print(text, end="")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=2) + "\n")
    args.json.with_suffix(".md").write_text(text)


if __name__ == "__main__":
    main()
