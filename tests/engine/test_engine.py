"""The round loop end to end: run folder outputs, determinism, skip, divergence, and local_adamw through the engine == torch.optim.AdamW recreated every round."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import torch
import yaml

from fedbench.config import DataConfig, PartitionConfig, load_run_config
from fedbench.data import load_dataset
from fedbench.data.partition import partition
from fedbench.engine import train
from fedbench.engine.schedule import client_schedule, local_lr
from fedbench.models import build_model
from tests.conftest import TINY, read_metrics, strip_elapsed


def tiny_config(*extra: str):
    sets = [v for i, v in enumerate(TINY) if i % 2 == 1]
    return load_run_config(None, [*sets, *extra])


def test_run_folder_outputs(tmp_path):
    cfg = tiny_config("algorithm.name=fedadamw", "algorithm.lr=0.01")
    result = train(cfg, tmp_path, save_model=True)
    run = result.run_dir
    assert result.status == "completed" and run.parent == tmp_path / "runs"
    assert run.name.startswith("fedadamw-N6-lr0.01-T4-part0.5-K3-B16-digits-logreg-s0-")
    assert yaml.safe_load((run / "config.yaml").read_text())["fl"]["rounds"] == 4
    rows = read_metrics(run)
    assert [r["round"] for r in rows] == [0, 2, 4]
    assert set(rows[0]) == {
        "round",
        "test_acc",
        "test_loss",
        "train_loss",
        "lr",
        "comm_up",
        "comm_down",
        "elapsed_s",
    }
    d = 64 * 10 + 10
    summary = json.loads((run / "summary.json").read_text())
    assert summary["d"] == d and summary["comm_up"] == d + 2 and summary["comm_down"] == 2 * d + 2
    # 3 clients per round x 4 rounds, cumulative floats
    assert rows[-1]["comm_up"] == (d + 2) * 3 * 4
    assert sum(summary["participation_counts"]) == 12 and len(summary["participation_counts"]) == 6
    assert summary["final"]["test_acc"] == rows[-1]["test_acc"]
    assert summary["best"]["test_acc"] == max(r["test_acc"] for r in rows)
    part = json.loads((run / "partition.json").read_text())
    assert len(part["clients"]) == 6 and all(c["n"] == 239 for c in part["clients"])
    assert sum(part["clients"][0]["class_counts"]) == 239
    state = torch.load(run / "model.pt", weights_only=True)
    assert set(state) == {"1.weight", "1.bias"}
    assert not (run / "checkpoint.pt").exists()
    # Training helps: accuracy beats the initial model's.
    assert rows[-1]["test_acc"] > rows[0]["test_acc"] + 20


def test_deterministic_metrics_on_cpu(tmp_path):
    cfg = tiny_config("model.name=cnn")
    a = train(cfg, tmp_path / "a").run_dir
    b = train(cfg, tmp_path / "b").run_dir
    assert strip_elapsed(read_metrics(a)) == strip_elapsed(read_metrics(b))


def test_finished_run_is_skipped(tmp_path):
    cfg = tiny_config()
    first = train(cfg, tmp_path)
    mtime = (first.run_dir / "metrics.jsonl").stat().st_mtime_ns
    second = train(cfg, tmp_path)
    assert second.status == "skipped" and second.summary["status"] == "completed"
    assert (first.run_dir / "metrics.jsonl").stat().st_mtime_ns == mtime


def test_divergence_is_a_status_not_a_crash(tmp_path):
    cfg = tiny_config("algorithm.name=fedavg", "algorithm.lr=1.0e12", "algorithm.grad_clip=null")
    result = train(cfg, tmp_path)
    assert result.status == "diverged"
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["status"] == "diverged" and "non-finite" in summary["error"]


def test_local_adamw_engine_equals_torch_adamw_recreated_each_round(tmp_path):
    """Full-batch steps, no clipping: the engine's global model equals a hand-written FL loop
    that recreates torch.optim.AdamW for every client every round."""
    sets = [
        "model.name=logreg",
        "partition.clients=4",
        "fl.rounds=3",
        "fl.participation=0.5",
        "fl.local_steps=4",
        "fl.batch_size=0",
        "algorithm.name=local_adamw",
        "algorithm.lr=0.01",
        "algorithm.weight_decay=0.05",
        "algorithm.grad_clip=null",
        "eval.every=3",
    ]
    cfg = load_run_config(None, sets)
    run_dir = train(cfg, tmp_path, save_model=True).run_dir
    got = torch.load(run_dir / "model.pt", weights_only=True)

    data = load_dataset(DataConfig(name="digits"))
    parts = partition(data.y_train.numpy(), PartitionConfig(clients=4), 10)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model, data.input_shape, 10)
    x = copy.deepcopy(model.state_dict())
    for r, clients in enumerate(client_schedule(cfg.seed, 3, 4, 2)):
        lr = local_lr(cfg.algorithm, r, 3)
        new = {k: torch.zeros_like(v) for k, v in x.items()}
        for c in clients:
            model.load_state_dict(x)
            opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.05)
            idx = torch.as_tensor(parts[c])
            for _ in range(4):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(
                    model(data.x_train[idx]), data.y_train[idx]
                ).backward()
                opt.step()
            for k, v in model.state_dict().items():
                new[k] += v / len(clients)
        x = new
    for key in x:
        np.testing.assert_allclose(got[key].numpy(), x[key].numpy(), atol=1e-5)


def test_weights_only_checkpoint_roundtrip(tmp_path):
    from fedbench.engine.checkpoint import load_checkpoint, save_checkpoint

    path = Path(tmp_path) / "c.pt"
    state = {
        "round": 3,
        "x": [torch.ones(2)],
        "server": {"v_bar": torch.zeros(1)},
        "clients": {1: {"c": [torch.ones(1)]}},
    }
    save_checkpoint(path, state)
    loaded = load_checkpoint(path, torch.device("cpu"))
    assert loaded["round"] == 3 and torch.equal(loaded["clients"][1]["c"][0], torch.ones(1))


def test_rounds_to_target_is_the_first_evaluated_round_reaching_it():
    from fedbench.engine.loop import rounds_to_target

    rows = [{"round": r, "test_acc": acc} for r, acc in ((0, 10.0), (5, 60.0), (10, 80.0))]
    assert rounds_to_target(rows, 60.0) == 5
    assert rounds_to_target(rows, 79.9) == 10
    assert rounds_to_target(rows, 95.0) is None
    assert rounds_to_target(rows, None) is None
