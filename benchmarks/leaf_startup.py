"""Start-up time and peak memory of `fedbench train` on a generated LEAF FEMNIST federation with
thousands of natural clients: `python benchmarks/leaf_startup.py [--users 3500] [--train 16]`.

Run from the repository root. It writes a FEMNIST-format folder (LEAF's JSON layout, 28x28
images, 62 classes) with USERS users of TRAIN + TEST samples each under benchmarks/.cache/, then
runs `fedbench train` twice on it with one round of one client step: cold (parsing the JSON and
writing fedbench's memory-mapped cache) and warm (the cache exists). Start-up = the process's wall
time minus the engine's own wall time (summary.json wall_s); peak memory = the child's max RSS.
Results are appended to benchmarks/results/leaf_startup.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from fedbench.data.leaf_sample import write_leaf  # noqa: E402


def run_train(folder: Path, users: int, out: Path) -> dict[str, float]:
    cmd = [
        sys.executable,
        "-m",
        "fedbench",
        "train",
        "--out",
        str(out),
        *("--set", "data.name=femnist", "--set", f"data.path={folder}"),
        *("--set", "partition.kind=natural", "--set", f"partition.clients={users}"),
        *("--set", "model.name=leaf_femnist_cnn", "--set", "algorithm.name=fedavg"),
        *(
            "--set",
            "fl.rounds=1",
            "--set",
            "fl.local_steps=1",
            "--set",
            f"fl.participation={5 / users}",
        ),
        *("--set", "fl.batch_size=10", "--set", "eval.train_subset=200"),
        *("--set", "runtime.device=cpu", "--set", "runtime.checkpoint_every=0"),
    ]
    # A wrapper process per run, so that its children's max RSS is this run's alone.
    wrapper = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
        "capture_output=True); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *cmd], check=True, cwd=ROOT, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    peak_kib = int(done.stdout.split()[-1])
    summary = json.loads(next(out.glob("runs/*/summary.json")).read_text())
    shutil.rmtree(out)
    return {
        "process_wall_s": round(wall, 2),
        "engine_wall_s": summary["wall_s"],
        "startup_s": round(wall - summary["wall_s"], 2),
        "peak_rss_mib": round(peak_kib / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=3500)
    parser.add_argument("--train", type=int, default=16)
    parser.add_argument("--test", type=int, default=4)
    args = parser.parse_args()
    folder = HERE / ".cache" / f"femnist_{args.users}x{args.train}"
    if not (folder / "data" / "test").is_dir():
        t0 = time.perf_counter()
        write_leaf(folder, "femnist", users=args.users, train=args.train, test=args.test, files=35)
        print(f"generated {folder} in {time.perf_counter() - t0:.1f} s")
    shutil.rmtree(folder / "fedbench-cache", ignore_errors=True)
    json_mib = sum(p.stat().st_size for p in (folder / "data").rglob("*.json")) / 2**20
    row = {
        "users": args.users,
        "train_per_user": args.train,
        "test_per_user": args.test,
        "json_mib": round(json_mib, 1),
        "cold": run_train(folder, args.users, HERE / ".cache" / "run_cold"),
        "warm": run_train(folder, args.users, HERE / ".cache" / "run_warm"),
    }
    print(json.dumps(row, indent=2))
    results = HERE / "results" / "leaf_startup.json"
    rows = json.loads(results.read_text()) if results.is_file() else []
    results.write_text(json.dumps([*rows, row], indent=2) + "\n")


if __name__ == "__main__":
    main()
