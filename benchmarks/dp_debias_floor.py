"""Measure DP-FedAdamW's `debias_floor` f (docs/privacy.md, "Choosing debias_floor"):
`python benchmarks/dp_debias_floor.py OUT [--seeds 1] [--fmnist-root DIR --fmnist-seeds 1]
[--only quick|fmnist] [--variants f=0.1,f=1,...] [--summary-only]`.

Run from the repository root. On every DP quick preset (configs/dp/*.yaml) it trains the rows whose
algorithm is dp_fedadamw once per variant (f in {0, 0.01, 0.1, 1}, and `v_bias_correction: local`
at f = 0, the DP paper's Algorithm 1 line 15) in OUT/<variant>/, and the DP-LocalAdamW and
DP-FedAvg rows in OUT/baselines/; cells that several tables share are trained once. Every run
evaluates each round (`eval.every=1`) so that a loss spike between the preset's evaluations is
seen. With `--fmnist-root` (a folder holding fashion-mnist/) it also trains Fashion-MNIST
(benchmarks/dp_debias_floor.yaml) in OUT/fmnist/. Runs go `--workers` at a time (2),
single-threaded, the variants that decide the default first; a finished run is not trained
again. `--only` and `--variants` restrict what is trained. Last, it prints the table: the mean
final test accuracy per (table, variant) over finished runs and, last line, the largest train
loss of any run (unfinished ones included) relative to its round-0 value: the criterion that
picks the default f is "never above 3x"; cells above it are starred.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import torch

from fedbench.config import RunConfig, parse_run_config, read_yaml
from fedbench.engine import train
from fedbench.runner.table_config import expand, load_table, parse_table_config

FMNIST = Path(__file__).resolve().parent / "dp_debias_floor.yaml"
TABLES = [
    "dp_table2",
    "dp_table2_vit",
    "dp_table3",
    "dp_table4",
    "dp_table5",
    "dp_table6",
    "dp_table7",
    "dp_table8",
    "dp_table9",
    "dp_table10",
    "dp_table11",
]
#: variant label -> --set overrides of the dp_fedadamw rows.
VARIANTS = {
    "f=0": ["algorithm.debias_floor=0.0"],
    "f=0.01": ["algorithm.debias_floor=0.01"],
    "f=0.1": ["algorithm.debias_floor=0.1"],
    "f=1": ["algorithm.debias_floor=1.0"],
    "local (f=0)": ["algorithm.debias_floor=0.0", "algorithm.v_bias_correction=local"],
}
BASELINES = {"dp_local_adamw": "DP-LocalAdamW", "dp_fedavg": "DP-FedAvg"}
#: A run is unstable when its train loss ever exceeds this multiple of its round-0 value.
BLOWUP = 3.0


def _slug(label: str) -> str:
    return label.replace("=", "").replace(" ", "_").replace("(", "").replace(")", "")


@dataclass(frozen=True)
class Job:
    table: str
    variant: str
    method: str
    cfg: RunConfig
    out: Path

    @property
    def run_dir(self) -> Path:
        return self.out / "runs" / self.cfg.run_id()


def _quick_jobs(out: Path, seeds: int) -> list[Job]:
    """Every DP quick preset: dp_fedadamw rows per variant, the baseline rows once."""
    jobs = []
    for name in TABLES:
        table = load_table(name)
        by_alg: dict[str, list[str]] = defaultdict(list)
        for label, overrides in table.methods.items():
            by_alg[overrides["algorithm"]["name"]].append(label)
        for variant, sets in VARIANTS.items():
            plan = expand(
                table,
                preset="quick",
                seeds=seeds,
                methods=by_alg["dp_fedadamw"],
                overrides=["eval.every=1", *sets],
            )
            jobs += [Job(name, variant, r.method, r.cfg, out / _slug(variant)) for r in plan.runs]
        rows = [m for alg in BASELINES for m in by_alg.get(alg, [])]
        if rows:
            plan = expand(
                table, preset="quick", seeds=seeds, methods=rows, overrides=["eval.every=1"]
            )
            jobs += [
                Job(name, BASELINES[r.cfg.algorithm.name], r.method, r.cfg, out / "baselines")
                for r in plan.runs
            ]
    return jobs


def _fmnist_jobs(out: Path, seeds: int, root: str) -> list[Job]:
    table = parse_table_config(read_yaml(FMNIST), str(FMNIST))
    plan = expand(table, seeds=seeds, overrides=[f"data.root={root}"])
    return [Job("fmnist", r.method, r.method, r.cfg, out / "fmnist") for r in plan.runs]


def _train(task: tuple[dict, Path, str]) -> str:
    """One run in a worker process (configs travel as dicts: DP config classes are built at
    import time and do not pickle)."""
    data, out, label = task
    torch.set_num_threads(1)  # two single-threaded runs at a time: the machine has 2 cores
    result = train(parse_run_config(data), out)  # skips a run finished in the meantime
    return f"{label}: {result.status}"


#: Training order: the runs that decide the default first (the machine may be slow).
PRIORITY = ["f=0.01", "f=0.1", "f=1", "DP-LocalAdamW", "DP-FedAvg", "f=0", "local (f=0)"]


def _priority(job: Job) -> int:
    return PRIORITY.index(job.variant)


def run_all(jobs: list[Job], workers: int) -> None:
    unique = list({job.run_dir: job for job in jobs}.values())  # tables share identical cells
    unique.sort(key=_priority)
    print(f"{len(jobs)} cells, {len(unique)} distinct runs", flush=True)
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        tasks = [
            (
                j.cfg.model_dump(mode="json"),
                j.out,
                f"{j.table} {j.variant} {j.method} s{j.cfg.seed}",
            )
            for j in unique
            if not (j.run_dir / "summary.json").is_file()
        ]
        for i, done in enumerate(pool.imap_unordered(_train, tasks), 1):
            print(f"[{i}/{len(tasks)}] {done}", flush=True)


def _run_stats(run_dir: Path) -> tuple[float | None, float]:
    """(final test_acc, or None while the run is unfinished; max train_loss / round-0
    train_loss so far, inf when the loss is not finite)."""
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "train_loss" in r]
    first = rows[0]["train_loss"]
    worst = max(r["train_loss"] for r in rows)
    ratio = worst / first if math.isfinite(worst) else math.inf
    finished = (run_dir / "summary.json").is_file()
    last = max(rows, key=lambda r: r["round"])
    return (last["test_acc"] if finished else None), ratio


def _collect(jobs: list[Job]) -> dict[tuple[str, str], list[tuple[float | None, float]]]:
    """(table, variant) -> [(final acc, loss ratio)] of its distinct runs (cells x seeds)."""
    runs: dict[tuple[str, str], set[Path]] = defaultdict(set)
    for job in jobs:
        if job.method == "w/o BC":
            continue  # no DP correction: the floor does not apply
        if (job.run_dir / "metrics.jsonl").is_file():
            runs[(job.table, job.variant)].add(job.run_dir)
    return {key: [_run_stats(d) for d in sorted(dirs)] for key, dirs in runs.items()}


def summary(jobs: list[Job]) -> str:
    cells = _collect(jobs)
    variants = [*VARIANTS, *BASELINES.values()]
    tables = [t for t in [*TABLES, "fmnist"] if any((t, v) in cells for v in variants)]
    lines = [
        "| table | " + " | ".join(variants) + " |",
        "| --- |" + " --- |" * len(variants),
    ]
    worst: dict[str, float] = defaultdict(float)
    for table in tables:
        row = []
        for v in variants:
            stats = cells.get((table, v), [])
            if not stats:
                row.append("-")
                continue
            ratio = max(r for _, r in stats)
            worst[v] = max(worst[v], ratio)
            mark = "*" if ratio > BLOWUP else ""
            done = [a for a, _ in stats if a is not None]
            acc = f"{sum(done) / len(done):.1f}{mark} ({len(done)})" if done else f"-{mark}"
            unfinished = len(stats) - len(done)
            row.append(acc + (f" +{unfinished} unfinished" if unfinished else ""))
        lines.append(f"| {table} | " + " | ".join(row) + " |")
    lines.append(
        "| max train loss / round 0 | "
        + " | ".join(f"{worst[v]:.3g}" if v in worst else "-" for v in variants)
        + " |"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seeds", type=int, default=1, help="seeds of the quick presets")
    parser.add_argument("--fmnist-seeds", type=int, default=1)
    parser.add_argument("--fmnist-root", default=None, help="folder holding fashion-mnist/")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", choices=["fmnist", "quick"], default=None, help="train one part")
    parser.add_argument("--variants", default=None, help="comma-separated variants to train")
    parser.add_argument("--summary-only", action="store_true")
    args = parser.parse_args()
    out = args.out.resolve()
    jobs = _fmnist_jobs(out, args.fmnist_seeds, args.fmnist_root) if args.fmnist_root else []
    jobs += _quick_jobs(out, args.seeds)
    if not args.summary_only:
        chosen = args.variants.split(",") if args.variants else PRIORITY
        part = [
            j
            for j in jobs
            if (args.only is None or (j.table == "fmnist") == (args.only == "fmnist"))
            and j.variant in chosen
        ]
        run_all(part, args.workers)
    print(summary(jobs))


if __name__ == "__main__":
    main()
