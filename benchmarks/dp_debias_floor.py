"""Measure DP-FedAdamW's `debias_floor` f (docs/privacy.md, "Choosing debias_floor"):
`python benchmarks/dp_debias_floor.py OUT [--seeds 3] [--only quick|fmnist-small]
[--floors 0,0.01,...] [--fmnist-root DIR] [--set KEY=VALUE ...] [--summary-only]`.

Run from the repository root. It trains dp_table2's DP-FedAdamW row (`blocks: dp_paper`) once per
floor f and seed on two presets: `quick` (digits, logreg; both Dirichlet columns, evaluated every
round so that a loss spike between evaluations is seen) and `fmnist-small` (Fashion-MNIST 14x14,
cnn; the Dir-0.1 column only, and smaller than the preset so that it fits a 2-core CPU: see
PRESETS), then the DP-FedAvg and DP-LocalAdamW rows of the same cells as references. Runs go
`--workers` at a time (2), single-threaded, all seeds of the floors first; a finished run is not
trained again, so the command can be rerun to finish an interrupted measurement. Last, it prints
one line per (preset, column, f): final test accuracy and train loss, mean ± std over seeds
(ddof 1), and the largest train loss of any run relative to its round-0 value (starred above
BLOWUP, 3x).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import torch

from fedbench.config import parse_run_config
from fedbench.engine import train
from fedbench.runner.table_config import expand, load_table

TABLE = "dp_table2"
FLOORS = [0.0, 0.01, 0.03, 0.1, 0.3, 1.0]
BASELINES = ["DP-FedAvg", "DP-LocalAdamW"]
#: preset -> overrides of every run. Digits: every round evaluated. Fashion-MNIST: the Dir-0.1
#: column, 20 clients at 10% (2 a round), 30 rounds x K 5 (the preset: 50 clients at 10%,
#: 100 rounds x K 10), evaluated every 3 rounds on 1,000 training samples.
PRESETS = {
    "quick": ["eval.every=1"],
    "fmnist-small": [
        "partition.alpha=0.1",
        "partition.clients=20",
        "fl.rounds=30",
        "fl.local_steps=5",
        "eval.every=3",
    ],
}
#: A run is unstable when its train loss ever exceeds this multiple of its round-0 value.
BLOWUP = 3.0


@dataclass(frozen=True)
class Job:
    preset: str
    variant: str  # "f=<f>" or a baseline row
    data: dict
    run_dir: Path


def _label(f: float) -> str:
    return f"f={f:g}"


def jobs(
    out: Path, presets: list[str], floors: list[float], seeds: int, extra: list[str]
) -> list[Job]:
    table = load_table(TABLE)
    result = []
    for preset in presets:
        sets = [*PRESETS[preset], *extra]
        for f in floors:
            plan = expand(
                table,
                preset=preset,
                seeds=seeds,
                methods=["DP-FedAdamW"],
                overrides=[*sets, f"algorithm.debias_floor={f}"],
            )
            result += [
                Job(preset, _label(f), r.cfg.model_dump(mode="json"), out / "runs" / r.cfg.run_id())
                for r in plan.runs
            ]
        plan = expand(table, preset=preset, seeds=seeds, methods=BASELINES, overrides=sets)
        result += [
            Job(preset, r.method, r.cfg.model_dump(mode="json"), out / "runs" / r.cfg.run_id())
            for r in plan.runs
        ]
    return result


def _train(task: tuple[dict, Path, str]) -> str:
    """One run in a worker process (configs travel as dicts: DP config classes are built at
    import time and do not pickle)."""
    data, out, label = task
    torch.set_num_threads(1)  # two single-threaded runs at a time: the machine has 2 cores
    result = train(parse_run_config(data), out)  # skips a run finished in the meantime
    return f"{label}: {result.status}"


def run_all(todo: list[Job], out: Path, workers: int) -> None:
    unique = list({job.run_dir: job for job in todo}.values())  # columns may share a cell
    # Floors before the reference rows (stable sort keeps presets and seeds in order).
    unique.sort(key=lambda j: not j.variant.startswith("f="))
    tasks = [
        (
            j.data,
            out,
            f"{j.preset} {j.variant} s{j.data['seed']} alpha {j.data['partition']['alpha']}",
        )
        for j in unique
        if not (j.run_dir / "summary.json").is_file()
    ]
    print(f"{len(unique)} distinct runs, {len(tasks)} to train", flush=True)
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        for i, done in enumerate(pool.imap_unordered(_train, tasks), 1):
            print(f"[{i}/{len(tasks)}] {done}", flush=True)


def run_stats(run_dir: Path) -> tuple[float | None, float, float | None] | None:
    """(final test_acc, or None while the run is unfinished; max train_loss / round-0
    train_loss so far, inf when the loss is not finite; final train_loss or None); None before
    the first evaluation."""
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "train_loss" in r]
    if not rows:
        return None
    first = rows[0]["train_loss"]
    worst = max(r["train_loss"] for r in rows)
    ratio = worst / first if math.isfinite(worst) else math.inf
    finished = (run_dir / "summary.json").is_file()
    last = max(rows, key=lambda r: r["round"])
    if not finished:
        return None, ratio, None
    return last["test_acc"], ratio, last["train_loss"]


def _mean_std(values: list[float], spec: str) -> str:
    """'mean ± std' (ddof 1) of the finished runs, the value alone for one, '-' for none."""
    if len(values) >= 2:
        return f"{statistics.mean(values):{spec}} ± {statistics.stdev(values):{spec}}"
    return f"{values[0]:{spec}}" if values else "-"


def _key(job: Job) -> tuple[str, float, str]:
    return job.preset, job.data["partition"]["alpha"], job.variant


def summary(all_jobs: list[Job]) -> str:
    dirs: dict[tuple[str, float, str], set[Path]] = defaultdict(set)
    for job in all_jobs:
        # By the config hash: the readable part of a run id names the fields that differ from
        # the defaults, so it changes when a default does (debias_floor's did).
        digest = job.run_dir.name.rsplit("-", 1)[-1]
        for run_dir in job.run_dir.parent.glob(f"*-{digest}"):
            if (run_dir / "metrics.jsonl").is_file():
                dirs[_key(job)].add(run_dir)
    lines = [
        "| preset | Dir alpha | variant | final test acc (%) | final train loss | runs "
        "| max train loss / round 0 |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    order = list(dict.fromkeys(_key(j) for j in all_jobs))
    for key in order:
        if key not in dirs:
            continue
        stats = [st for d in sorted(dirs[key]) if (st := run_stats(d)) is not None]
        if not stats:
            continue
        done = [a for a, _, _ in stats if a is not None]
        losses = [loss for _, _, loss in stats if loss is not None]
        ratio = max(r for _, r, _ in stats)
        acc, final_loss = _mean_std(done, ".1f"), _mean_std(losses, ".3g")
        mark = " *" if ratio > BLOWUP else ""
        unfinished = len(stats) - len(done)
        runs = f"{len(done)}" + (f" (+{unfinished} unfinished)" if unfinished else "")
        lines.append(
            f"| {key[0]} | {key[1]:g} | {key[2]} | {acc} | {final_loss} | {runs} | {ratio:.3g}{mark} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--only", choices=list(PRESETS), default=None, help="train one preset")
    parser.add_argument("--floors", default=None, help="comma-separated f values to train")
    parser.add_argument("--no-baselines", action="store_true", help="skip DP-FedAvg/LocalAdamW")
    parser.add_argument("--fmnist-root", default=None, help="folder holding fashion-mnist/")
    parser.add_argument("--set", dest="extra", action="append", default=[], help="KEY=VALUE")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--summary-only", action="store_true")
    args = parser.parse_args()
    out = args.out.resolve()
    presets = [args.only] if args.only else list(PRESETS)
    floors = [float(x) for x in args.floors.split(",")] if args.floors else FLOORS
    extra = list(args.extra)
    everything = []
    for preset in presets:
        root = [f"data.root={args.fmnist_root}"] if args.fmnist_root and preset != "quick" else []
        everything += jobs(out, [preset], floors, args.seeds, [*root, *extra])
    if not args.summary_only:
        todo = [j for j in everything if not (args.no_baselines and not j.variant.startswith("f="))]
        run_all(todo, out, args.workers)
    print(summary(everything))


if __name__ == "__main__":
    main()
