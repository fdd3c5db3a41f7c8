"""Where a client step's time goes (part of `make gpu-check`): torch.profiler over one round of
the Table 1 federation (FedAdamW, B 50, CIFAR-shaped random data; K 10, 10 clients) for
ResNet-18 BN and ViT-Tiny, after a warm-up round; the top CUDA kernels and the top CPU ops by
self time, per client step, so that the next speed-up is chosen from a measurement.

    python benchmarks/profile_step.py [--precision fp32|bf16] [--engine E] [--json F]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fedbench.config import load_run_config  # noqa: E402
from fedbench.engine.run import select_engine  # noqa: E402
from fedbench.engine.run_folder import RunFolder  # noqa: E402
from fedbench.engine.setup import prepare_run  # noqa: E402

MODELS = {
    "resnet18-bn": ["model.name=resnet18", "model.norm=bn"],
    "vit_tiny": ["model.name=vit_tiny"],
}
TOP = 12


def table(events: list, key: str, steps: int) -> list[dict]:
    rows = sorted(events, key=lambda e: getattr(e, key), reverse=True)[:TOP]
    return [
        {
            "name": e.key[:90],
            "us_per_step": round(getattr(e, key) / steps, 1),
            "calls_per_step": round(e.count / steps, 2),
        }
        for e in rows
        if getattr(e, key) > 0
    ]


def main() -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--engine", default="sequential")
    parser.add_argument("--local-steps", type=int, default=10)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    out = {"device": torch.cuda.get_device_name(0) if cuda else "cpu", "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(0)
        npz = Path(tmp) / "cifar_random.npz"
        np.savez(
            npz,
            x_train=rng.normal(size=(2000, 3, 32, 32)).astype(np.float32),
            y_train=rng.integers(0, 100, 2000),
            x_test=rng.normal(size=(100, 3, 32, 32)).astype(np.float32),
            y_test=rng.integers(0, 100, 100),
        )
        for name, items in MODELS.items():
            cfg = load_run_config(
                None,
                [
                    "data.name=npz",
                    f"data.path={npz}",
                    "partition.clients=20",
                    "fl.participation=0.5",
                    f"fl.local_steps={args.local_steps}",
                    f"fl.batch_size={args.batch}",
                    "fl.rounds=2",
                    "algorithm.name=fedadamw",
                    f"runtime.precision={args.precision}",
                    f"runtime.engine={args.engine}",
                    *items,
                ],
            )
            setup = prepare_run(cfg)
            engine = select_engine(setup, RunFolder(Path(tmp) / name), None)
            engine._round(0, 1e-3)  # warm-up (CUDA graph capture, cuDNN autotuning)
            if cuda:
                torch.cuda.synchronize()
            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
            with profile(activities=activities) as prof:
                engine._round(1, 1e-3)
                if cuda:
                    torch.cuda.synchronize()
            steps = 10 * args.local_steps
            events = prof.key_averages()
            entry = {"client_steps": steps, "cpu_ops": table(events, "self_cpu_time_total", steps)}
            if cuda:
                entry["cuda_kernels"] = table(events, "self_device_time_total", steps)
                entry["cuda_us_per_step"] = round(
                    sum(e.self_device_time_total for e in events) / steps, 1
                )
            entry["cpu_us_per_step"] = round(sum(e.self_cpu_time_total for e in events) / steps, 1)
            out["models"][name] = entry
            print(
                name, json.dumps({k: v for k, v in entry.items() if "us_per_step" in k}), flush=True
            )
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
