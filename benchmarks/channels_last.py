"""NCHW against NHWC (channels_last) for fedbench's convolutional models on the CPU: the
measurement behind the execution plan's `channels_last` entry (fedbench/engine/plan.py).

Per model: SGD steps/s of forward + cross-entropy + backward + step at batch 32 on random
data of the model's input shape, float32, at each thread count asked, NCHW and NHWC
alternated `--repeats` times (the median is kept: other processes move single repeats).

    python benchmarks/channels_last.py [--threads 1,2] [--repeats 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from torch import nn

from fedbench.config import ModelConfig
from fedbench.models.base import build_model

#: (model, input shape, classes, timed steps): the CNNs of the quick presets and LEAF, and
#: Table 1's ResNet-18 (GroupNorm) on CIFAR-100's shape.
CASES = [
    ("cnn", (1, 8, 8), 10, 200),
    ("cnn", (1, 28, 28), 10, 60),
    ("cnn_bn", (1, 28, 28), 10, 60),
    ("leaf_femnist_cnn", (1, 28, 28), 62, 20),
    ("resnet18", (3, 32, 32), 100, 3),
]
BATCH = 32


def steps_per_s(name: str, shape: tuple[int, ...], classes: int, steps: int, nhwc: bool) -> float:
    torch.manual_seed(0)
    model = build_model(ModelConfig(name=name), shape, classes)
    x = torch.randn(BATCH, *shape)
    y = torch.randint(0, classes, (BATCH,))
    if nhwc:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    for _ in range(3):  # oneDNN picks and caches its kernels on the first calls
        step()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return steps / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for name, shape, classes, steps in CASES:
            nchw, nhwc = [], []
            for _ in range(args.repeats):
                nchw.append(steps_per_s(name, shape, classes, steps, nhwc=False))
                nhwc.append(steps_per_s(name, shape, classes, steps, nhwc=True))
            row = {
                "model": name,
                "input": "x".join(map(str, shape)),
                "threads": threads,
                "nchw_steps_per_s": round(statistics.median(nchw), 2),
                "nhwc_steps_per_s": round(statistics.median(nhwc), 2),
            }
            row["nhwc_over_nchw"] = round(row["nhwc_steps_per_s"] / row["nchw_steps_per_s"], 2)
            rows.append(row)
            print(
                f"{name:18s} {row['input']:8s} {threads} thread(s): NCHW "
                f"{row['nchw_steps_per_s']:8.2f}  NHWC {row['nhwc_steps_per_s']:8.2f} steps/s "
                f"({row['nhwc_over_nchw']:.2f}x)",
                flush=True,
            )
    if args.json is not None:
        args.json.write_text(json.dumps({"torch": torch.__version__, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
