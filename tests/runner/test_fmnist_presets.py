"""The real-data presets `fmnist` (the paper's models adapted to 28x28x1) and `fmnist-small`
(CPU-sized models) of Table 1 and the FedAdamW ablations: they expand, build their models on
Fashion-MNIST's shape, and a table trains end to end on Fashion-MNIST files in the real IDX
format written here."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from fedbench.models import build_model
from fedbench.runner.table_config import expand, find_table, load_table

FMNIST_TABLES = [
    ("table1", "table"),
    *(
        (name, "ablation")
        for name in ("components", "alpha", "weight-decay", "aggregation", "blocks")
    ),
]


@pytest.mark.parametrize(("name", "kind"), FMNIST_TABLES)
@pytest.mark.parametrize("preset", ["fmnist", "fmnist-small"])
def test_fmnist_presets_expand_on_fashion_mnist(name: str, kind: str, preset: str) -> None:
    table = load_table(name, kind)
    assert preset in table.presets, f"{find_table(name, kind)} has no {preset} preset"
    plan = expand(table, preset=preset, seeds=1)
    assert plan.runs
    for run in plan.runs:
        assert run.cfg.data.name == "fmnist"
        if preset == "fmnist-small":
            assert run.cfg.data.image_size == 14 and run.cfg.model.name in ("cnn", "logreg")
            assert run.cfg.fl.rounds >= 100  # the findings page's 100+ rounds


@pytest.mark.parametrize("model", ["resnet18", "vit_tiny"])
def test_the_fmnist_preset_builds_the_papers_models_for_28x28x1(model: str) -> None:
    plan = expand(load_table("table1"), preset="fmnist", seeds=1)
    cfg = next(r.cfg for r in plan.runs if r.cfg.model.name == model)
    net = build_model(cfg.model, (1, 28, 28), 10)
    out = net(torch.zeros(2, 1, 28, 28))
    assert out.shape == (2, 10)
    if model == "vit_tiny":
        assert net.patch_embed.kernel_size == (4, 4)  # 7x7 tokens


def _write_idx(raw: Path, name: str, array: np.ndarray) -> None:
    header = bytes([0, 0, 8, array.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in array.shape)
    with gzip.open(raw / f"{name}.gz", "wb") as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


def test_fmnist_small_table1_trains_end_to_end(tmp_path: Path, monkeypatch, run_cli) -> None:
    import fedbench.data.vision as vision

    monkeypatch.setattr(vision, "DEBIAN_FMNIST", tmp_path / "nowhere")  # only the files below
    raw = tmp_path / "data" / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", 1000), ("t10k", 200)):
        labels = np.arange(n) % 10
        # Learnable images: a bright row per class on noise.
        images = rng.integers(0, 60, size=(n, 28, 28))
        images[np.arange(n), 2 * labels + 4, :] = 255
        _write_idx(raw, f"{split}-images-idx3-ubyte", images)
        _write_idx(raw, f"{split}-labels-idx1-ubyte", labels)
    code, _, err = run_cli(
        "run", "table1", "--preset", "fmnist-small", "--methods", "FedAvg,FedAdamW",
        "--seeds", "1", "--set", f"data.root={tmp_path / 'data'}", "--set", "fl.rounds=4",
        "--set", "eval.every=2", "--set", "model.name=cnn", "--set", "partition.alpha=0.1",
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert code == 0, err
    folder = tmp_path / "out" / "table1-fmnist-small"
    plan = json.loads((folder / "plan.json").read_text())
    assert len(plan["runs"]) == 2
    for run in plan["runs"]:
        summary = json.loads(
            (tmp_path / "out" / "runs" / run["run_id"] / "summary.json").read_text()
        )
        assert summary["status"] == "completed" and summary["rounds"] == 4
        assert summary["final"]["test_acc"] > 10.0  # above chance on the learnable images
    assert "Fashion-MNIST" in (folder / "table.md").read_text()
