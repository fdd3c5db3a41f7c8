"""The host's cost of a client step, measured on the CPU (no GPU needed): the proxy for the
launch-bound GPU regime of issue 34, where a step's kernels are tiny and the host decides the
speed.

At negligible compute (8x8 inputs, batch 2, one thread) a step's time is the host's: Python,
the dispatcher, autograd. For each workload this measures, per client step,
- `ops`: aten ops dispatched (fedbench.engine.dispatch.OpCounter; each is >= 1 kernel launch
  on a GPU), over one whole round of the engine (batch draws, local rule, aggregation);
- `host_ms`: wall time (best of `--repeats` timed rounds after a warm-up round);
for the engine's variants (sequential eager; sequential with `runtime.compile`, i.e. the whole
step compiled where it can be captured; vectorized) against a bare AdamW loop on the same
model and batches (fedbench.engine.bench.BareLoop), eager and compiled.

    python benchmarks/host_overhead.py [--label after] [--out benchmarks/results/host-overhead-cpu]

writes OUT.json (rows are replaced per label, so a before and an after run sit side by side)
and OUT.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from fedbench.config import load_run_config  # noqa: E402
from fedbench.engine.bench import BareLoop  # noqa: E402
from fedbench.engine.dispatch import OpCounter  # noqa: E402
from fedbench.engine.run import select_engine  # noqa: E402
from fedbench.engine.run_folder import RunFolder  # noqa: E402
from fedbench.engine.schedule import local_lr  # noqa: E402
from fedbench.engine.setup import prepare_run  # noqa: E402

WORKLOADS = {
    "vit_tiny": ["model.name=vit_tiny"],
    "resnet18-bn": ["model.name=resnet18", "model.norm=bn"],
    "cnn": ["model.name=cnn"],
}
VARIANTS = {
    "sequential": ["runtime.engine=sequential"],
    "sequential+compile": ["runtime.engine=sequential", "runtime.compile=true"],
    "vectorized": ["runtime.engine=vectorized"],
}
#: Table 1's federation shape at negligible compute: FedAdamW, 10 clients a round, K 10, B 2.
BASE = [
    "data.name=digits",
    "partition.clients=20",
    "fl.participation=0.5",
    "fl.local_steps=10",
    "fl.batch_size=2",
    "fl.rounds=100",
    "algorithm.name=fedadamw",
    "algorithm.grad_clip=10.0",
    "runtime.device=cpu",
    "runtime.checkpoint_every=0",
]


def _engine_row(items: list[str], repeats: int) -> dict[str, Any]:
    cfg = load_run_config(None, [*BASE, *items])
    setup = prepare_run(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        engine = select_engine(setup, RunFolder(Path(tmp)), None)
        steps = len(setup.schedule[0]) * cfg.fl.local_steps

        def one_round(r: int) -> float:
            t0 = time.perf_counter()
            engine._round(r, local_lr(cfg.algorithm, r, cfg.fl.rounds))
            return time.perf_counter() - t0

        one_round(0)  # warm-up (and compilation)
        one_round(1)
        # A dispatch mode cannot run inside a compiled graph: compiled rows count no ops.
        ops = None if engine.plan.compile != "off" else _ops(lambda: one_round(2)) / steps
        best = min(one_round(3 + i) for i in range(repeats))
        bare = BareLoop(setup, engine.plan)
        bare.steps(steps)  # warm-up
        bare_ops = None if engine.plan.compile != "off" else _ops(lambda: bare.steps(steps)) / steps
        bare_best = min(_timed(bare.steps, steps) for _ in range(repeats))
    return {
        "engine": type(engine).__name__,
        "compiled": getattr(engine, "compiled", None),
        "ops": ops,
        "host_ms": 1e3 * best / steps,
        "bare_ops": bare_ops,
        "bare_host_ms": 1e3 * bare_best / steps,
    }


def _ops(fn: Any) -> int:
    with OpCounter() as ops:
        fn()
    return ops.total


def _timed(fn: Any, n: int) -> float:
    t0 = time.perf_counter()
    fn(n)
    return time.perf_counter() - t0


def measure(label: str, repeats: int, workloads: list[str], variants: list[str]) -> list[dict]:
    rows = []
    for workload in workloads:
        for variant in variants:
            items = [*WORKLOADS[workload], *VARIANTS[variant]]
            row = {"label": label, "workload": workload, "variant": variant}
            row.update(_engine_row(items, repeats))
            row["overhead"] = row["host_ms"] / row["bare_host_ms"]
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def write(rows: list[dict], out: Path, meta: dict[str, Any]) -> None:
    path = out.with_suffix(".json")
    old = json.loads(path.read_text())["rows"] if path.exists() else []
    labels = {r["label"] for r in rows}
    rows = [r for r in old if r["label"] not in labels] + rows
    path.write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    lines = [
        "# Host overhead per client step (CPU, negligible compute)",
        "",
        f"`python benchmarks/host_overhead.py` on {meta['machine']}, torch {meta['torch']}, "
        f"1 thread. FedAdamW, Table 1's federation shape (10 clients a round, K 10) at batch 2 "
        "on 8x8 digits: a step's time is the host's. ops = aten ops dispatched per client step "
        "over a whole round; host ms = wall time per client step (best of the timed rounds); "
        "bare = torch.optim.AdamW loop on the same model (compiled forward where the variant "
        "compiles). overhead = engine host ms / bare host ms.",
        "",
        "| label | workload | variant | compiled | ops | bare ops | host ms | bare ms | overhead |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['label']} | {r['workload']} | {r['variant']} | {r['compiled'] or '-'} | "
            f"{_count(r['ops'])} | {_count(r['bare_ops'])} | {r['host_ms']:.2f} | "
            f"{r['bare_host_ms']:.2f} | {r['overhead']:.2f} |"
        )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n" + meta.get("note", "") + "\n")


def _count(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="after")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS))
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS))
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/host-overhead-cpu")
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = measure(args.label, args.repeats, args.workloads, args.variants)
    meta = {
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "note": args.note,
    }
    write(rows, args.out, meta)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
