"""Seeds trained together (`runtime.seeds_together`) against the same seeds trained one after
the other on the vectorised engine: client steps/s of each, on whatever device is present.

Each model trains N seeds (one RunSetup and VectorizedEngine each, as the launcher builds them);
"stacked" rounds put every seed's sampled clients into one chunk-trainer call (the SeedsEngine
round), "separate" rounds train the seeds' rounds one after the other (what N separate runs in
one process cost; N runs side by side on one GPU with `runs_per_gpu` share it instead). Rounds
only: no evaluation, no checkpoint. After a warm-up round of each, stacked and separate
alternate `--repeats` times and the best of each is kept.

    client_steps_per_s = seeds * S * K * rounds / seconds

Workloads: `cnn` (the small CNN on the embedded digits data; the CPU default) and, as in
`fedbench bench --suite table1`, `resnet18_bn` and `vit_tiny` on CIFAR-sized random data at
Table 1's federation (100 clients, S 10, B 50; K from --local-steps).

    python benchmarks/seeds_together.py --models cnn --seeds 5 --markdown benchmarks/results/seeds-together-cpu.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.measurement import measurement, write_measurement  # noqa: E402
from fedbench.config import parse_run_config  # noqa: E402
from fedbench.engine.plan import execution_plan  # noqa: E402
from fedbench.engine.run_folder import RunFolder  # noqa: E402
from fedbench.engine.schedule import local_lr  # noqa: E402
from fedbench.engine.seeds import share_data  # noqa: E402
from fedbench.engine.setup import prepare_run  # noqa: E402
from fedbench.engine.stacked import stacked_rounds  # noqa: E402
from fedbench.engine.vectorized import VectorizedEngine  # noqa: E402
from fedbench.runner.bench_suite import (  # noqa: E402
    WORKLOADS,
    table1_config,
    write_random_cifar,
)

CNN = {
    "data": {"name": "digits", "augment": False},
    "partition": {"kind": "iid", "clients": 20},
    "model": {"name": "cnn"},
    "fl": {"rounds": 100, "participation": 0.25, "local_steps": 10, "batch_size": 16},
    "algorithm": {"name": "fedadamw", "lr": 1.0e-3},
}


def config(model: str, npz: Path, local_steps: int, seed: int) -> dict[str, Any]:
    """The run config of one seed of a workload (vectorised engine)."""
    base = CNN if model == "cnn" else table1_config(npz, WORKLOADS[model])
    data = json.loads(json.dumps(base))
    data["seed"] = seed
    data["fl"]["local_steps"] = local_steps
    data["runtime"] = {"engine": "vectorized", "checkpoint_every": 0}
    return data


def engines(model: str, seeds: int, local_steps: int, tmp: Path) -> list[VectorizedEngine]:
    npz = tmp / "cifar.npz"
    if model != "cnn" and not npz.exists():
        write_random_cifar(npz, n_train=5000, n_test=100)
    setups = [
        prepare_run(parse_run_config(config(model, npz, local_steps, seed)))
        for seed in range(seeds)
    ]
    share_data(setups)
    return [
        VectorizedEngine(
            execution_plan(setup, group=len(setups)), setup, RunFolder(tmp / f"{model}-{i}"), None
        )
        for i, setup in enumerate(setups)
    ]


def stacked_round(group: list[VectorizedEngine], r: int) -> None:
    rounds = [engine.round_of(r, local_lr(engine.cfg.algorithm, r, engine.cfg.fl.rounds), False)
              for engine in group]  # fmt: skip
    training = [(e, own) for e, own in zip(group, rounds, strict=True) if own is not None]
    found = stacked_rounds([e for e, _ in training], [own for _, own in training])
    for (engine, own), diagnostics in zip(training, found, strict=True):
        engine._after_round(own.results, diagnostics)


def separate_round(group: list[VectorizedEngine], r: int) -> None:
    for engine in group:
        engine._round(r, local_lr(engine.cfg.algorithm, r, engine.cfg.fl.rounds))


def _timed(step: Any, group: list[VectorizedEngine], first: int, rounds: int) -> float:
    device = group[0].setup.device
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for r in range(first, first + rounds):
        step(group, r)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0


def measure(model: str, seeds: int, local_steps: int, rounds: int, repeats: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        group = engines(model, seeds, local_steps, Path(tmp))
        s = len(group[0].setup.schedule[0])
        steps = seeds * s * local_steps * rounds
        stacked_round(group, 0)  # warm-up
        separate_round(group, 0)
        best = {"stacked": float("inf"), "separate": float("inf")}
        for i in range(repeats):
            first = 1 + i * rounds
            best["separate"] = min(best["separate"], _timed(separate_round, group, first, rounds))
            best["stacked"] = min(best["stacked"], _timed(stacked_round, group, first, rounds))
    return {
        "model": model,
        "seeds": seeds,
        "clients_per_round": s,
        "local_steps": local_steps,
        "batch_size": group[0].cfg.fl.batch_size,
        "timed_rounds": rounds,
        "stacked_steps_per_s": round(steps / best["stacked"], 2),
        "separate_steps_per_s": round(steps / best["separate"], 2),
        "speedup": round(best["separate"] / best["stacked"], 2),
    }


def markdown(result: dict) -> str:
    lines = [
        f"# Seeds trained together: {result['device']}",
        "",
        f"`python benchmarks/seeds_together.py {' '.join(result['argv'])}`, "
        f"{result['measured_at']}, torch {result['torch']}, {result['threads']} torch threads; "
        f"load average {result['load_before']} before, {result['load_after']} after "
        f"({result['cores']} cores, shared with other jobs: timings are noisy).",
        "",
        "Client steps/s of N seeds (fedadamw, vectorised engine): stacked into one computation "
        "per round (`runtime.seeds_together: N`) against the N seeds' rounds one after the other "
        "(separate runs in one process). Best of the repeats.",
        "",
        "| model | seeds | S | K | B | stacked steps/s | separate steps/s | speedup |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['model']} | {row['seeds']} | {row['clients_per_round']} | "
            f"{row['local_steps']} | {row['batch_size']} | {row['stacked_steps_per_s']} | "
            f"{row['separate_steps_per_s']} | {row['speedup']}x |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["cnn"], choices=["cnn", *WORKLOADS])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--local-steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (CPU)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--markdown", type=Path, default=None)
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    load_before = round(os.getloadavg()[0], 2)
    rows = []
    for model in args.models:
        row = measure(model, args.seeds, args.local_steps, args.rounds, args.repeats)
        print(
            f"{model}: {row['seeds']} seeds stacked {row['stacked_steps_per_s']} client steps/s, "
            f"separate {row['separate_steps_per_s']} ({row['speedup']}x)",
            flush=True,
        )
        rows.append(row)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    result = measurement(device, load_before, rows)
    write_measurement(result, args.json, args.markdown, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
