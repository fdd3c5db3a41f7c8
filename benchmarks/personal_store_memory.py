"""Peak memory of the per-client state store (fedbench.personal.store) for many clients:
ResNet-18's head (what FedPer / FedRep / FedBABU keep per client) and ResNet-18's full model
(what Ditto keeps as v_i, and Local-only), in memory and bounded with spilling to disk.

Each case runs in a fresh process: it builds the model's state shapes, writes one state per
client into a store (as client_end does), reads every state back once (as the next round and
the evaluation do), and reports the process's peak RSS (getrusage ru_maxrss), its RSS before
the writes, the store's own peak bytes in memory and the bytes on disk.

    python benchmarks/personal_store_memory.py [--out benchmarks/results/personal-store-memory]

writes OUT.json and OUT.md (the table docs/personalised.md quotes).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: (label, what is stored, clients, bound in MiB or None).
CASES = [
    ("head, CIFAR-10, in memory", "head10", 1000, None),
    ("head, CIFAR-100, in memory", "head100", 1000, None),
    ("head, CIFAR-10, bound 4 MiB", "head10", 1000, 4.0),
    ("full model, in memory", "full", 20, None),
    ("full model, bound 256 MiB", "full", 20, 256.0),
    ("full model, bound 256 MiB", "full", 100, 256.0),
    ("full model, bound 256 MiB", "full", 1000, 256.0),
]


def rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def shapes(kind: str) -> list[tuple[int, ...]]:
    import torch

    from fedbench.config import ModelConfig
    from fedbench.models import build_model
    from fedbench.personal.heads import head_names

    classes = 100 if kind == "head100" else 10
    model = build_model(ModelConfig(name="resnet18", norm="gn"), (3, 32, 32), classes)
    head = head_names(model)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    keep = [p for n, p in named if kind == "full" or n in head]
    del model
    torch.cuda.empty_cache() if torch.cuda.is_available() else None
    return [tuple(p.shape) for p in keep]


def one_case(kind: str, clients: int, bound: float | None) -> dict:
    import torch

    from fedbench.personal.store import ClientStore

    torch.set_num_threads(1)
    state_shapes = shapes(kind)
    floats = sum(int(torch.Size(s).numel()) for s in state_shapes)
    with tempfile.TemporaryDirectory(dir=os.environ.get("STORE_TMP")) as tmp:
        folder = Path(tmp) / "client_states"
        store = ClientStore(
            torch.device("cpu"),
            None if bound is None else int(bound * 2**20),
            None if bound is None else folder,
        )
        before = rss_mib()
        t0 = time.perf_counter()
        for client in range(clients):
            store[client] = {"personal": [torch.full(s, float(client)) for s in state_shapes]}
        write_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for client in range(clients):
            assert float(store[client]["personal"][0].flatten()[0]) == float(client)
        read_s = time.perf_counter() - t0
        disk = sum(p.stat().st_size for p in folder.glob("*.pt")) if folder.is_dir() else 0
        return {
            "floats_per_client": floats,
            "state_mib": floats * 4 / 2**20,
            "rss_before_mib": round(before, 1),
            "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "store_peak_mib": round(store.peak_bytes / 2**20, 1),
            "spilled": store.spilled,
            "disk_mib": round(disk / 2**20, 1),
            "write_s": round(write_s, 2),
            "read_s": round(read_s, 2),
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results/personal-store-memory")
    parser.add_argument("--case", type=int, help=argparse.SUPPRESS)  # one case, in a child
    args = parser.parse_args()
    if args.case is not None:
        _, kind, clients, bound = CASES[args.case]
        print(json.dumps(one_case(kind, clients, bound)))
        return
    rows = []
    for i, (label, _kind, clients, bound) in enumerate(CASES):
        done = subprocess.run(
            [sys.executable, __file__, "--case", str(i)], capture_output=True, text=True, check=True
        )
        row = {"case": label, "clients": clients, "bound_mib": bound}
        row.update(json.loads(done.stdout.strip().splitlines()[-1]))
        rows.append(row)
        print(row, flush=True)
    load = os.getloadavg()
    record = {"machine": platform.processor() or platform.machine(), "load": load, "rows": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    lines = [
        "| case | clients | state (MiB) | store in memory, peak (MiB) | spilled | disk (MiB) "
        "| RSS before (MiB) | peak RSS (MiB) | write / read all (s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['clients']} | {r['state_mib']:.3f} | {r['store_peak_mib']} | "
            f"{r['spilled']} | {r['disk_mib']} | {r['rss_before_mib']} | {r['peak_rss_mib']} | "
            f"{r['write_s']} / {r['read_s']} |"
        )
    lines.append(f"\nload average during the run: {load[0]:.1f}")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
