"""`python -m benchmarks.faults`: run the cases (all, or --only a subset) and print the tally."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # `python benchmarks/faults`: the checkout's root makes `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import faults
from benchmarks.faults.api import case_api
from benchmarks.faults.bombs import case_bombs
from benchmarks.faults.concurrency import case_concurrency
from benchmarks.faults.context import Context
from benchmarks.faults.corruptions import case_corruptions
from benchmarks.faults.dataloss import case_data_loss
from benchmarks.faults.disk import case_disk_faults
from benchmarks.faults.harness import ROOT
from benchmarks.faults.inputs import case_bad_inputs, case_numbers, case_tune_flags
from benchmarks.faults.interrupts import case_interrupts
from benchmarks.faults.kills import case_kills
from benchmarks.faults.litter import case_litter
from benchmarks.faults.names import case_names
from benchmarks.faults.paths import case_paths
from benchmarks.faults.payloads import case_payloads
from benchmarks.faults.readback import case_read_back
from benchmarks.faults.study import case_study

CASES = {
    "kills": case_kills,
    "corruptions": case_corruptions,
    "inputs": case_bad_inputs,
    "numbers": case_numbers,
    "tune": case_tune_flags,
    "disk": case_disk_faults,
    "payloads": case_payloads,
    "paths": case_paths,
    "concurrency": case_concurrency,
    "dataloss": case_data_loss,
    "readback": case_read_back,
    "names": case_names,
    "interrupts": case_interrupts,
    "study": case_study,
    "bombs": case_bombs,
    "api": case_api,
    "litter": case_litter,
}


def failure_kinds(failures: list[str]) -> dict[str, int]:
    """Failures by kind: tracebacks, data lost ("LOST"), hangs ("timed out"), other."""
    kinds = {"traceback": 0, "lost": 0, "hang": 0, "other": 0}
    for failure in failures:
        if "LOST" in failure:
            kinds["lost"] += 1
        elif "traceback" in failure.lower():
            kinds["traceback"] += 1
        elif "timed out" in failure:
            kinds["hang"] += 1
        else:
            kinds["other"] += 1
    return kinds


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.faults", description=faults.__doc__.split("\n\n")[0]
    )
    parser.add_argument("--only", help=f"comma-separated subset of {', '.join(CASES)}")
    parser.add_argument("--kills", type=int, default=4, help="SIGKILLs of a sweep (default 4)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the fedbench checkout to test")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    chosen = args.only.split(",") if args.only else list(CASES)
    work = Path(tempfile.mkdtemp(prefix="fedbench-faults-"))
    ctx = Context(args.root.resolve(), work, args.kills)
    # Started in the background by a shell, this process (and so every fedbench it starts)
    # would ignore SIGINT: the Ctrl-C cases need Python's own handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # `python -m fedbench` and `python -c` put the working folder first on sys.path: from a
    # checkout, that would test its fedbench instead of --root's.
    os.chdir(work)
    t0 = time.perf_counter()
    try:
        for name in chosen:
            print(f"{name}:", flush=True)
            CASES[name](ctx)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")
    counts = ctx.tally.counts
    labels = {
        "kills": "kills survived",
        "corruptions": "corruptions recovered",
        "bad inputs": "bad inputs giving one clean line",
        "I/O faults": "I/O faults leaving a resumable run and a report",
        "concurrency": "concurrent sweeps kept apart",
        "payloads executed": "payloads executed",
        "paths escaped": "paths escaped",
        "user links followed": "runs/ links placed by the user and followed (by design)",
        "data loss": "writes that kept every complete file (model.pt, reports, tuned.yaml)",
        "files read back": "damaged files read back: recovered or one clean line",
        "names and paths": "hostile names and paths: handled or one clean line",
        "interrupts": "Ctrl-C: exit 130 and one resume line (or finished)",
        "tune store": "study store faults and tune bounds: one clean line",
        "bombs": "resource bombs and degenerate data refused in one line",
        "api types": "Python API wrong types: FedbenchError or a TypeError naming it",
        "litter": "litter cleaned and smaller faults",
    }
    print(f"\nsummary ({time.perf_counter() - t0:.0f} s):")
    for key, label in labels.items():
        if key in counts:
            held, tried = counts[key]
            print(f"  {label}: {held} of {tried}")
    kinds = failure_kinds(ctx.tally.failures)
    print(
        f"  failures: {kinds['traceback']} tracebacks, {kinds['lost']} data lost, "
        f"{kinds['hang']} hangs, {kinds['other']} other"
    )
    bad = [k for k in ("payloads executed", "paths escaped") if counts.get(k, [0])[0]]
    return 1 if ctx.tally.failures or bad else 0


if __name__ == "__main__":
    sys.exit(main())
