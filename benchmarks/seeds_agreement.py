"""How far seeds trained together (`runtime.seeds_together`) are from the same seeds trained
alone, in float32: the bound that docs/performance.md and summary.json's `seeds_together` state.

Each seed is trained twice on the vectorised engine, as the local launcher trains it: with the
other seeds in one stacked computation (fedbench.engine.run_seeds.train_together on all the
configs) and alone (train_together on its config only). The stacked step runs the seeds' clients
through one vmap, whose batched kernels (matmuls, grouped convolutions) sum in another order
than a run's own, so the two differ by float rounding, which training then carries on. Reported
per seed and in all: whether metrics.jsonl (elapsed_s aside) and the final weights are bitwise
equal, the largest absolute difference of each metric over every evaluated round, and the
largest absolute difference of a final weight.

    python benchmarks/seeds_agreement.py --seeds 6 --rounds 12 --markdown benchmarks/results/seeds-agreement-cpu.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.measurement import measurement, write_measurement  # noqa: E402
from fedbench.config import parse_run_config  # noqa: E402
from fedbench.engine.run import RunResult  # noqa: E402
from fedbench.engine.run_seeds import train_together  # noqa: E402

#: The small CNN on the embedded digits data (benchmarks/seeds_together.py's workload), every
#: round evaluated.
CNN = {
    "data": {"name": "digits", "augment": False},
    "partition": {"kind": "iid", "clients": 20},
    "model": {"name": "cnn"},
    "fl": {"participation": 0.25, "local_steps": 10, "batch_size": 16},
    "algorithm": {"name": "fedadamw", "lr": 1.0e-3},
    "eval": {"every": 1, "train_subset": 500},
    "runtime": {"engine": "vectorized", "checkpoint_every": 0, "device": "cpu"},
}


def _config(seed: int, rounds: int, algorithm: str, sets: list[str]) -> Any:
    """One seed's config: CNN with the rounds, the algorithm and the `--set KEY=VALUE`s."""
    data = json.loads(json.dumps(CNN))
    data["seed"] = seed
    data["fl"]["rounds"] = rounds
    data["algorithm"]["name"] = algorithm
    for item in sets:
        key, _, text = item.partition("=")
        *path, last = key.split(".")
        node = data
        for part in path:
            node = node.setdefault(part, {})
        try:
            node[last] = json.loads(text)
        except json.JSONDecodeError:
            node[last] = text
    return parse_run_config(data)


def _folder(result: Any) -> Path:
    if not isinstance(result, RunResult):
        raise RuntimeError(f"a run did not finish: {result!r}")
    return result.run_dir


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _compare(together: Path, alone: Path) -> dict[str, Any]:
    """Bitwise equality and the largest absolute differences of one seed's two run folders."""
    rows_a = _rows(together / "metrics.jsonl")
    rows_b = _rows(alone / "metrics.jsonl")
    assert len(rows_a) == len(rows_b)
    metrics: dict[str, float] = {}
    same = True
    for ra, rb in zip(rows_a, rows_b, strict=True):
        for key, value in ra.items():
            if key == "elapsed_s" or not isinstance(value, int | float):
                continue
            diff = abs(float(value) - float(rb[key]))
            same = same and value == rb[key]
            metrics[key] = max(metrics.get(key, 0.0), diff)
    wa = torch.load(together / "model.pt", weights_only=True)
    wb = torch.load(alone / "model.pt", weights_only=True)
    weights = max(float((wa[k].double() - wb[k].double()).abs().max()) for k in wa)
    bitwise = same and all(torch.equal(wa[k], wb[k]) for k in wa)
    return {"bitwise": bitwise, "metrics": metrics, "weights": weights}


def measure(seeds: int, rounds: int, algorithm: str, sets: list[str]) -> dict[str, Any]:
    cfgs = [_config(seed, rounds, algorithm, sets) for seed in range(seeds)]
    with tempfile.TemporaryDirectory() as tmp:
        together = [
            _folder(r) for r in train_together(cfgs, Path(tmp) / "together", save_model=True)
        ]
        alone = [
            _folder(train_together([cfg], Path(tmp) / "alone", save_model=True)[0]) for cfg in cfgs
        ]
        per_seed = [_compare(a, b) for a, b in zip(together, alone, strict=True)]
    keys = sorted({k for row in per_seed for k in row["metrics"]})
    return {
        "algorithm": algorithm,
        "model": cfgs[0].model.name,
        "set": sets,
        "seeds": seeds,
        "rounds": rounds,
        "bitwise_equal": sum(row["bitwise"] for row in per_seed),
        "max_abs_diff": {k: max(row["metrics"].get(k, 0.0) for row in per_seed) for k in keys},
        "max_abs_weight_diff": max(row["weights"] for row in per_seed),
        "per_seed": per_seed,
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"# Seeds trained together against alone: {result['device']}",
        "",
        f"`python benchmarks/seeds_agreement.py {' '.join(result['argv'])}`, "
        f"{result['measured_at']}, torch {result['torch']}, {result['threads']} torch threads; "
        f"load average {result['load_before']} before, {result['load_after']} after "
        f"({result['cores']} cores, shared with other jobs).",
        "",
        "float32, digits (20 clients, S 5, K 10, B 16; overrides in the table), every round "
        "evaluated: each seed trained with the others (`runtime.seeds_together`) and alone, on "
        "the vectorised engine. Largest absolute difference over all seeds and rounds.",
        "",
        "| model | overrides | algorithm | seeds | rounds | bitwise equal | train_loss | test_loss "
        "| test_acc | final weights |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in result["rows"]:
        d = row["max_abs_diff"]
        lines.append(
            f"| {row['model']} | {' '.join(row['set']) or '-'} | {row['algorithm']} | "
            f"{row['seeds']} | {row['rounds']} | "
            f"{row['bitwise_equal']} of {row['seeds']} | {d.get('train_loss', 0):.2g} | "
            f"{d.get('test_loss', 0):.2g} | {d.get('test_acc', 0):.2g} | "
            f"{row['max_abs_weight_diff']:.2g} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--algorithms", nargs="+", default=["fedadamw", "fedavg"])
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--set", nargs="*", default=[], help="KEY=VALUE config overrides")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    load_before = round(os.getloadavg()[0], 2)
    rows = []
    for algorithm in args.algorithms:
        row = measure(args.seeds, args.rounds, algorithm, args.set)
        print(
            f"{algorithm}: {row['bitwise_equal']} of {row['seeds']} seeds bitwise equal; "
            f"max |diff| {row['max_abs_diff']}, weights {row['max_abs_weight_diff']:.3g}",
            flush=True,
        )
        rows.append(row)
    result = measurement(torch.device("cpu"), load_before, rows)
    write_measurement(result, args.json, args.markdown, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
