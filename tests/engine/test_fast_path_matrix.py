"""The fast paths as a matrix on the CPU (the paper-scale issue): engine (sequential, vectorized)
x precision (fp32, bf16 = CPU autocast) x normalisation (BatchNorm, GroupNorm, LayerNorm ViT,
LoRA ViT) x privacy (none, sample-level DP, client-level DP). Every cell either trains (finite
losses, parameters moved) or is refused before training with one line saying why and what to
use instead - never a traceback. Where the vectorised engine is exact (fp32, no DP noise), it
ends where the sequential one does."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedbench.config import load_run_config
from fedbench.engine import train
from fedbench.errors import FedbenchError

pytestmark = [pytest.mark.slow, pytest.mark.engine]

MODELS = {
    "batchnorm": ["model.name=resnet18", "model.norm=bn"],
    "groupnorm": ["model.name=resnet18", "model.norm=gn", "model.norm_groups=2"],
    "layernorm": ["model.name=vit_nano", "data.image_size=8"],
    "lora": [
        "model.name=vit_micro",
        "data.image_size=16",
        "model.lora={r: 2, alpha: 4, dropout: 0.0}",
    ],
}
PRIVACY = {
    "none": [],
    "sample-dp": ["algorithm.name=dp_fedavg", "privacy.noise_multiplier=0.5", "privacy.clip=1.0"],
    "client-dp": ["privacy.level=client", "privacy.noise_multiplier=0.5", "privacy.clip=1.0"],
}
#: Two clients, two steps of 4 samples, evaluated on 29 held-out samples: the paths, not a result.
BASE = [
    "data.name=digits",
    "data.val_fraction=0.02",
    "partition.clients=2",
    "fl.participation=1.0",
    "fl.rounds=1",
    "fl.local_steps=2",
    "fl.batch_size=4",
    "algorithm.name=fedavg",
    "algorithm.lr=0.05",
    "eval.train_subset=8",
    "runtime.device=cpu",
    "runtime.checkpoint_every=0",
]


def _cfg(model: str, privacy: str, engine: str, precision: str):
    return load_run_config(
        None,
        [*BASE, *MODELS[model], *PRIVACY[privacy], f"runtime.engine={engine}",
         f"runtime.precision={precision}"],
    )  # fmt: skip


def _run(tmp_path: Path, cfg) -> tuple[dict, list[torch.Tensor]]:
    result = train(cfg, tmp_path, console=None, save_model=True)
    state = torch.load(result.run_dir / "model.pt", map_location="cpu")
    return result.summary, [t.double() for t in state.values() if t.is_floating_point()]


@pytest.mark.parametrize("privacy", list(PRIVACY))
@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("engine", ["sequential", "vectorized"])
def test_each_fast_path_trains_or_is_refused_in_one_line(
    tmp_path: Path, engine: str, precision: str, model: str, privacy: str
) -> None:
    cfg = _cfg(model, privacy, engine, precision)
    if model == "batchnorm" and privacy != "none":
        with pytest.raises(FedbenchError) as info:
            train(cfg, tmp_path, console=None)
        message = str(info.value)
        assert "\n" not in message and "BatchNorm" in message and "model.norm gn" in message
        assert ("sample-level" if privacy == "sample-dp" else "client-level") in message
        assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
        return
    torch.manual_seed(0)
    summary, final = _run(tmp_path, cfg)
    assert summary["status"] == "completed", summary
    assert torch.isfinite(torch.tensor(summary["final"]["train_loss"]))
    initial = [
        t.double()
        for t in __import__("fedbench.engine.setup", fromlist=["prepare_run"])
        .prepare_run(cfg)
        .model.state_dict()
        .values()
        if t.is_floating_point()
    ]
    moved = sum(float((a - b).norm()) for a, b in zip(final, initial, strict=True))
    assert moved > 0, "training left every parameter where it started"


@pytest.mark.parametrize("model", ["batchnorm", "groupnorm", "layernorm", "lora"])
def test_vectorized_ends_where_sequential_does_in_fp32(tmp_path: Path, model: str) -> None:
    finals = []
    for engine in ("sequential", "vectorized"):
        _, final = _run(tmp_path / engine, _cfg(model, "none", engine, "fp32"))
        finals.append(final)
    num = sum(float((a - b).norm() ** 2) for a, b in zip(*finals, strict=True)) ** 0.5
    den = sum(float(a.norm() ** 2) for a in finals[0]) ** 0.5
    # fp32 rounding: BatchNorm's batched statistics reduce in another order under vmap.
    tolerance = 5e-4 if model == "batchnorm" else 1e-5
    assert num <= tolerance * den, f"relative difference {num / den:.2e}"
