"""Rerun the performance benchmarks: `python benchmarks/run.py [--quick] [NAME ...]`.

Run from the repository root. Each benchmark is `fedbench bench CONFIG --json` for a YAML of this
folder and a list of runtime variants (engine, precision, compile); the JSON rows are merged into
benchmarks/results/<tag>.json, rewritten as a table in benchmarks/results/<tag>.md.
`--quick` shrinks the Table 1 shapes to K 2, one timed round, so that a CPU finishes them
(the rows say so).
`--threads N` is passed to every `fedbench bench` call (torch CPU threads).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NPZ = HERE / ".cache" / "cifar_random.npz"

VARIANTS = {
    "sequential": ["--set", "runtime.engine=sequential"],
    "vectorized": ["--set", "runtime.engine=vectorized"],
    "sequential+bf16": ["--set", "runtime.engine=sequential", "--set", "runtime.precision=bf16"],
    "sequential+compile": ["--set", "runtime.engine=sequential", "--set", "runtime.compile=true"],
    "vectorized+compile": ["--set", "runtime.engine=vectorized", "--set", "runtime.compile=true"],
}
BENCHMARKS = {
    "cnn_digits": list(VARIANTS),
    "vit_fmnist": ["sequential", "vectorized"],
    "table1_resnet18_gn": ["sequential", "vectorized"],
    "table1_vit_tiny": ["sequential", "vectorized"],
}
#: Extra `fedbench bench` arguments per benchmark (fewer timed rounds for the slow ones).
ARGS = {"vit_fmnist": ["--rounds", "1"]}
QUICK_K = 2
QUICK = ["--set", f"fl.local_steps={QUICK_K}", "--rounds", "1", "--repeats", "1"]


def make_random_cifar(path: Path, n_train: int = 10000, n_test: int = 1000) -> None:
    """CIFAR-sized random data: 3x32x32 standard-normal images, 100 classes (float16 on disk)."""
    if path.is_file():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    np.savez(
        path,
        x_train=rng.standard_normal((n_train, 3, 32, 32), dtype=np.float32).astype(np.float16),
        y_train=rng.integers(0, 100, n_train),
        x_test=rng.standard_normal((n_test, 3, 32, 32), dtype=np.float32).astype(np.float16),
        y_test=np.arange(n_test) % 100,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(BENCHMARKS))
    parser.add_argument("--quick", action="store_true", help="K 2 for the Table 1 shapes")
    parser.add_argument("--tag", default=None, help="results file name (default: the device)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()
    extra = ["--threads", str(args.threads)] if args.threads else []
    make_random_cifar(NPZ)
    rows = []
    for name in args.names:
        for variant in BENCHMARKS[name]:
            cmd = [sys.executable, "-m", "fedbench", "bench", f"benchmarks/{name}.yaml"]
            cmd += [*VARIANTS[variant], *ARGS.get(name, []), "--json", *extra]
            if args.quick and name.startswith("table1"):
                cmd += QUICK
            print("+", " ".join(cmd[3:]), flush=True)
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            if proc.returncode != 0:
                print(proc.stderr, file=sys.stderr)
                continue
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            row["benchmark"], row["variant"] = name, variant
            row["quick"] = bool(args.quick and name.startswith("table1"))
            print(json.dumps(row), flush=True)
            rows.append(row)
            save(rows, args.tag or row["device"].split(":")[0])
    if not rows:
        sys.exit(1)


def save(rows: list[dict], tag: str) -> None:
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    # Rows of earlier runs for other (benchmark, variant) pairs are kept.
    path = out / f"{tag}.json"
    fresh = {(r["benchmark"], r["variant"]) for r in rows}
    if path.is_file():
        kept = [
            r for r in json.loads(path.read_text()) if (r["benchmark"], r["variant"]) not in fresh
        ]
        rows = kept + rows
    order = list(BENCHMARKS)
    rows.sort(key=lambda r: (order.index(r["benchmark"]), list(VARIANTS).index(r["variant"])))
    path.write_text(json.dumps(rows, indent=2) + "\n")
    (out / f"{tag}.md").write_text(markdown(rows))


def markdown(rows: list[dict]) -> str:
    head = (
        "| benchmark | variant | engine | device | S x K x B | client steps/s | bare steps/s "
        "| overhead | peak MB |\n|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['benchmark']}{f' (K {QUICK_K})' if r['quick'] else ''} | {r['variant']} | {r['engine']} "
        f"| {r['device']} | {r['clients_per_round']} x {r['local_steps']} x {r['batch_size']} "
        f"| {r['client_steps_per_s']:.1f} | {r['bare_steps_per_s']:.1f} | {r['overhead']:.2f} "
        f"| {r['peak_mem_mb']:.0f} |\n"
        for r in rows
    ]
    return head + "".join(lines)


if __name__ == "__main__":
    main()
