"""Cost of a private step (per-sample clipping + noise) over the same non-private step.

    python benchmarks/dp_ratio.py [--paper] [--methods vmap ghost bk] [--threads N]
        [--out benchmarks/results]

For each model: the time of one non-private gradient (forward, backward) and of one private
gradient g_tilde (fedbench.privacy.mechanism.PrivateGradient) by torch.func vmap, by ghost
clipping and by book-keeping clipping (bk), on the same batch; the ratio private / non-private;
and `auto`, the method that `auto` ends on for the model (after its first-batch check). Best of N repeats; on a CPU the
times are the thread's CPU time (robust to other processes sharing the cores), on a GPU wall
time after a synchronisation. Default models: the DP tables' models in small form (a CPU
finishes them); `--paper`: the tables' own shapes (ResNet-18 GN at 32x32 B 50, ViT-Base and
Swin-Base + LoRA at 224 B 16, RoBERTa-Base + LoRA at 128 tokens B 16; random weights). Writes
`dp-<device>.json` into --out.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fedbench.config import ModelConfig  # noqa: E402
from fedbench.engine.plan import clipping_method  # noqa: E402
from fedbench.models import build_model  # noqa: E402
from fedbench.privacy.mechanism import PrivateGradient  # noqa: E402
from fedbench.runner.bench_suite import device_name  # noqa: E402

LORA = {"r": 16, "alpha": 32, "dropout": 0.0}
SMALL = {
    "cnn digits 1x8x8 B32": ("cnn", {}, (1, 8, 8), 10, 32),
    "logreg digits 1x8x8 B32": ("logreg", {}, (1, 8, 8), 10, 32),
    "resnet18 gn 3x16x16 B16": ("resnet18", {"norm": "gn"}, (3, 16, 16), 10, 16),
    "vit_micro + LoRA 3x32x32 B16": ("vit_micro", {"lora": LORA}, (3, 32, 32), 10, 16),
    "roberta_micro + LoRA 32 tokens B16": ("roberta_micro", {"lora": LORA}, (32,), 2, 16),
}
PAPER = {
    "resnet18 gn 3x32x32 B50": ("resnet18", {"norm": "gn"}, (3, 32, 32), 100, 50),
    "vit_base + LoRA 3x224x224 B16": ("vit_base", {"lora": LORA}, (3, 224, 224), 100, 16),
    "swin_base + LoRA 3x224x224 B16": ("swin_base", {"lora": LORA}, (3, 224, 224), 100, 16),
    "roberta_base + LoRA 128 tokens B16": ("roberta_base", {"lora": LORA}, (128,), 2, 16),
}


def timer(device: torch.device):
    def best(fn, repeats: int) -> float:
        fn()
        times = []
        for _ in range(repeats):
            if device.type == "cuda":
                torch.cuda.synchronize(device)
                t0 = time.perf_counter()
                fn()
                torch.cuda.synchronize(device)
                times.append(time.perf_counter() - t0)
            else:
                t0 = time.thread_time()
                fn()
                times.append(time.thread_time() - t0)
        return min(times)

    return best


METHODS = ("vmap", "ghost", "bk")


def measure(
    name: str, spec: tuple, device: torch.device, repeats: int, methods: tuple[str, ...] = METHODS
) -> dict:
    model_name, fields, shape, classes, batch = spec
    torch.manual_seed(0)
    model = build_model(ModelConfig(name=model_name, **fields), shape, classes).to(device).train()
    params = [p for p in model.parameters() if p.requires_grad]
    if len(shape) == 1:
        x = torch.randint(2, 1000, (batch, *shape), device=device)
    else:
        x = torch.randn(batch, *shape, device=device)
    y = torch.randint(0, classes, (batch,), device=device)
    best = timer(device)

    def plain() -> None:
        torch.autograd.grad(nn.functional.cross_entropy(model(x), y), params)

    row = {"model": name, "trainable": sum(p.numel() for p in params), "batch": batch}
    row["non_private_ms"] = 1e3 * best(plain, repeats)
    # privacy.clipping auto: the plan's method, falling back to vmap where it is not exact
    auto = PrivateGradient(
        model,
        params,
        noise_multiplier=1.0,
        clip=0.1,
        batch_size=batch,
        method=clipping_method(model),
        strict=False,
    )
    auto.clipped_sum(x, y)  # the first batch's check
    row["auto"] = auto.method
    auto.close()
    for method in methods:
        try:
            mech = PrivateGradient(
                model, params, noise_multiplier=1.0, clip=0.1, batch_size=batch, method=method
            )
            noise = torch.Generator(device=device).manual_seed(0)
            ms = 1e3 * best(
                lambda m=mech, g=noise: m(x, y, n_local=10 * batch, generator=g), repeats
            )
            row[f"{method}_ms"] = ms
            row[f"{method}_ratio"] = ms / row["non_private_ms"]
            mech.close()
        except Exception as exc:  # vmap cannot trace some models (data-dependent control flow)
            row[f"{method}_error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paper", action="store_true", help="the DP tables' own shapes")
    parser.add_argument("--only", nargs="*", default=None, help="model name substrings")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument(
        "--methods", nargs="+", default=list(METHODS), choices=METHODS, help="private methods"
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    models = PAPER if args.paper else SMALL
    rows = []
    for name, spec in models.items():
        if args.only and not any(s in name for s in args.only):
            continue
        repeats = args.repeats or (3 if "resnet" in name and device.type == "cpu" else 20)
        rows.append(measure(name, spec, device, repeats, tuple(args.methods)))
        print(json.dumps(rows[-1]), flush=True)
    dev = device_name(device)
    result = {
        "device": dev,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "threads": args.threads,
        "timing": "GPU wall time" if device.type == "cuda" else "thread CPU time",
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^a-z0-9]+", "-", dev.lower()).strip("-")
    path = args.out / f"dp-{slug}{'-paper' if args.paper else ''}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
