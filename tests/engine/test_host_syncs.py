"""No host sync inside a round: a training round reads no device value back (`.item()`,
`float(t)`, `.tolist()`, a tensor in an `if`), so that on a GPU the host queues the whole round
without waiting. Counted on the CPU with a TorchDispatchMode (`fedbench.engine.dispatch`): the
ops that sync on a GPU are the same ops here. Diagnostic rounds may read their statistics back."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import torch

from fedbench.algorithms.registry import ALGORITHMS
from fedbench.config import load_run_config
from fedbench.engine.dispatch import HOST_READS, SYNC_OPS, HostReads, OpCounter
from fedbench.engine.run import select_engine
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.schedule import local_lr
from fedbench.engine.setup import prepare_run
from tests.conftest import algorithm_needs

pytestmark = pytest.mark.engine

BASE = [
    "data.name=digits",
    "model.name=cnn",
    "partition.clients=4",
    "fl.participation=0.5",
    "fl.rounds=3",
    "fl.local_steps=3",
    "fl.batch_size=8",
    "runtime.device=cpu",
    "runtime.checkpoint_every=0",
]
#: Registered but refused at run time (no readable public source of one of its rules).
NOT_RUNNABLE = {"fedcada"}
NON_PRIVATE = sorted(
    name
    for name, cls in ALGORITHMS.items()
    if not cls.requires_privacy and cls.dp_twin_of is None and name not in NOT_RUNNABLE
)


def _round_syncs(items: list[str], diagnostics: bool = False) -> tuple[str, dict[str, int]]:
    """The engine's class and the sync ops of its second round (the first one warms it up)."""
    cfg = load_run_config(None, [*BASE, *items])
    setup = prepare_run(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        engine = select_engine(setup, RunFolder(Path(tmp)), None)
        engine._round(0, local_lr(cfg.algorithm, 0, cfg.fl.rounds))
        with HostReads() as reads, OpCounter() as ops:
            engine._round(1, local_lr(cfg.algorithm, 1, cfg.fl.rounds), diagnostics=diagnostics)
    assert ops.total > 100  # the mode saw the round's ops
    return type(engine).__name__, {**ops.syncs, **reads.counts}


def test_the_non_private_algorithms_are_all_here() -> None:
    assert {"fedavg", "scaffold", "fedcm", "fedadam", "fedlada", "fedadamw", "fedexp"} <= set(
        NON_PRIVATE
    )
    assert not any(name.startswith("dp_") for name in NON_PRIVATE)


@pytest.mark.parametrize("engine", ["sequential", "vectorized"])
@pytest.mark.parametrize("algorithm", NON_PRIVATE)
def test_a_round_reads_nothing_back(algorithm: str, engine: str) -> None:
    items = [f"algorithm.name={algorithm}", f"runtime.engine={engine}"]
    _, syncs = _round_syncs([*items, *algorithm_needs(algorithm)])
    assert syncs == {}


@pytest.mark.parametrize(
    "items",
    [
        # BatchNorm buffers, per-sample weighting, a learning-rate schedule within the round
        ["model.name=resnet18", "model.norm=bn", "algorithm.weighting=samples"],
        ["algorithm.lr_schedule=cosine", "algorithm.lr_schedule_scope=local"],
        # system heterogeneity (K_i per client) and dropout
        ["fl.local_steps_min=1", "fl.dropout=0.3", "algorithm.name=fednova"],
        ["algorithm.grad_clip=0.5", "runtime.precision=bf16"],
        # FedAdamW's per-head / per-row blocks of a ViT: block means and their expansion
        ["model.name=vit_nano", "data.image_size=8"],
        ["model.name=vit_nano", "data.image_size=8", "algorithm.blocks=module"],
    ],
    ids=[
        "batchnorm-weighted",
        "local-schedule",
        "heterogeneous",
        "clip-bf16",
        "vit-hessian-blocks",
        "vit-module-blocks",
    ],
)
@pytest.mark.parametrize("engine", ["sequential", "vectorized"])
def test_round_variants_read_nothing_back(items: list[str], engine: str) -> None:
    name = "algorithm.name=fedadamw"
    items = items if any(i.startswith("algorithm.name") for i in items) else [name, *items]
    _, syncs = _round_syncs([*items, f"runtime.engine={engine}"])
    assert syncs == {}


def test_the_counter_sees_a_sync() -> None:
    """The check can fail: `.item()` and a Python `if` on a tensor reach the dispatcher;
    `.tolist()`, `.numpy()` and `.cpu()` of a CPU tensor only the function mode."""
    t = torch.tensor([1.0, 2.0])
    with HostReads() as reads, OpCounter() as ops:
        t.sum().item()
        if t.sum() > 0:
            pass
        t.tolist()
        t.numpy()
        float(t[0])
    assert ops.syncs == {"_local_scalar_dense": 3} and set(ops.syncs) <= SYNC_OPS
    assert dict(reads.counts) == {"item": 1, "__bool__": 1, "tolist": 1, "numpy": 1, "__float__": 1}
    assert set(reads.counts) <= HOST_READS


def test_diagnostic_rounds_may_read_their_statistics_back() -> None:
    """FedAdamW Figure 2's diagnostics (client drift, v spread) are host floats: they sync, on
    evaluated rounds only."""
    _, syncs = _round_syncs(["algorithm.name=fedadamw", "eval.diagnostics=true"], diagnostics=True)
    assert syncs.get("_local_scalar_dense", 0) > 0


@pytest.mark.cuda
@pytest.mark.parametrize(
    "runtime",
    [
        ["runtime.engine=sequential"],
        ["runtime.engine=sequential", "runtime.precision=bf16", "runtime.cuda_graphs=on"],
        ["runtime.engine=sequential", "runtime.compile=true"],
        ["runtime.engine=vectorized", "runtime.compile=true"],
        ["runtime.engine=vectorized", "runtime.precision=bf16", "runtime.cuda_graphs=on"],
    ],
    ids=["sequential", "bf16-graphs", "compiled-step", "compiled-vectorized", "graphed-vectorized"],
)
def test_a_cuda_round_never_waits_for_the_device(runtime: list[str]) -> None:
    """On a GPU, copies to the host count too: CUDA's sync debug mode raises on any sync
    (after a warm-up round, which captures graphs and compiles)."""
    items = [*BASE[:-2], "runtime.device=cuda", "runtime.checkpoint_every=0", *runtime]
    cfg = load_run_config(None, [*items, "algorithm.name=fedadamw"])
    setup = prepare_run(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        engine = select_engine(setup, RunFolder(Path(tmp)), None)
        engine._round(0, local_lr(cfg.algorithm, 0, cfg.fl.rounds))
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            engine._round(1, local_lr(cfg.algorithm, 1, cfg.fl.rounds))
        finally:
            torch.cuda.set_sync_debug_mode("default")
