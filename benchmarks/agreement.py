"""Do the fast paths train like the reference? (part of `make gpu-check`)

A short real-data federation - Fashion-MNIST when its files are found (data.root, Debian's
package), else scikit-learn's digits - trained in every engine x precision x CUDA-graphs
combination for 3 seeds; each combination's mean final test accuracy is compared with the
sequential fp32 eager one. It agrees when

    |mean - mean_ref| <= max(MIN_TOL, 2 * sqrt(std^2 + std_ref^2))   (points of accuracy)

i.e. within twice the seed noise of the two, and never tighter than MIN_TOL points.

    python benchmarks/agreement.py [--rounds R] [--seeds N] [--data-root DIR] [--json F]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fedbench.config import load_run_config  # noqa: E402
from fedbench.engine import train  # noqa: E402
from fedbench.errors import FedbenchError  # noqa: E402

MIN_TOL = 2.0
#: (engine, precision, cuda_graphs, compile); the first is the reference. The H200 run of
#: 2026-11-26 found fp32 / tf32 with and without graphs and vectorised fp32 in agreement; the
#: GPU list keeps the fast paths: the vectorised step replayed as a CUDA graph in bf16 (first
#: after the reference: it is the newest path, fedbench.engine.graphed), graphs in bf16,
#: vectorised bf16 eager and, last, the compiled whole step (each run compiles its own step,
#: about 75 s on an H200: the run of 2026-11-27 ran out of time there, so it comes last).
COMBOS_GPU = [
    ("sequential", "fp32", "off", False),
    ("vectorized", "bf16", "on", False),
    ("sequential", "bf16", "on", False),
    ("vectorized", "bf16", "off", False),
    ("sequential", "bf16", "off", True),
]
COMBOS_CPU = [
    ("sequential", "fp32", "off", False),
    ("sequential", "bf16", "off", False),
    ("vectorized", "fp32", "off", False),
    ("vectorized", "bf16", "off", False),
]
MODELS = {
    "resnet18-bn": ["model.name=resnet18", "model.norm=bn"],
    "vit_tiny": ["model.name=vit_tiny"],
}


def base(data: list[str], rounds: int) -> list[str]:
    return [
        *data,
        "partition.clients=20",
        "partition.alpha=0.6",
        "fl.participation=0.25",
        f"fl.rounds={rounds}",
        "fl.local_steps=10",
        "fl.batch_size=32",
        "algorithm.name=fedadamw",
        "algorithm.lr=1e-3",
        f"eval.every={rounds}",
        "eval.train_subset=500",
        "runtime.checkpoint_every=0",
    ]


def data_items(root: str | None) -> tuple[list[str], str]:
    items = ["data.name=fmnist", "data.download=false"] + ([f"data.root={root}"] if root else [])
    try:
        from fedbench.data import load_dataset

        load_dataset(load_run_config(None, items).data)
        return items, "fmnist"
    except FedbenchError:
        return ["data.name=digits", "data.image_size=16"], "digits (no Fashion-MNIST found)"


def main() -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    combos = COMBOS_GPU if cuda else COMBOS_CPU
    data, source = data_items(args.data_root)
    print(
        f"agreement on {source}, {args.rounds} rounds, {args.seeds} seeds, "
        f"{'cuda' if cuda else 'cpu'}",
        flush=True,
    )
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            ref = None
            for engine, precision, graphs, compiled in combos:
                # A folder per combination: cuda_graphs is not in the run id (it changes no
                # result), so one folder would skip the second combination as finished.
                folder = Path(tmp) / f"{model}-{engine}-{precision}-{graphs}-{compiled}"
                accs, t0, error = [], time.perf_counter(), None
                for seed in range(args.seeds):
                    items = [
                        *base(data, args.rounds),
                        *MODELS[model],
                        f"seed={seed}",
                        f"runtime.engine={engine}",
                        f"runtime.precision={precision}",
                        f"runtime.cuda_graphs={graphs if cuda else 'off'}",
                        f"runtime.compile={str(compiled).lower()}",
                    ]
                    try:
                        summary = train(load_run_config(None, items), folder, console=None).summary
                        accs.append(summary["final"]["test_acc"])
                    except Exception as exc:  # reported in the row
                        error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                        break
                row = {
                    "model": model,
                    "engine": engine,
                    "precision": precision,
                    "cuda_graphs": graphs,
                    "compile": compiled,
                    "accs": accs,
                    "error": error,
                    "s": round(time.perf_counter() - t0, 1),
                }
                if accs and error is None:
                    row["mean"] = statistics.fmean(accs)
                    row["std"] = statistics.stdev(accs) if len(accs) > 1 else 0.0
                if ref is None:
                    ref = row
                if "mean" in row and "mean" in ref:
                    tol = max(MIN_TOL, 2 * (row["std"] ** 2 + ref["std"] ** 2) ** 0.5)
                    row["tolerance"] = round(tol, 2)
                    row["diff"] = round(row["mean"] - ref["mean"], 2)
                    row["agrees"] = abs(row["diff"]) <= tol
                else:
                    row["agrees"] = False
                results.append(row)
                print(json.dumps(row), flush=True)
    ok = all(r["agrees"] for r in results)
    out = {
        "source": source,
        "rounds": args.rounds,
        "seeds": args.seeds,
        "min_tol": MIN_TOL,
        "device": "cuda" if cuda else "cpu",
        "all_agree": ok,
        "rows": results,
    }
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    print(f"agreement: {'all agree' if ok else 'DISAGREEMENT'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
