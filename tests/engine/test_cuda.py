"""The engine on a CUDA device (skipped without one; `make gpu-check` runs them on a GPU): the
same short federations as on the CPU, compared across devices, engines, precisions and CUDA
graphs, and the two paper-scale crashes (vectorised bf16 with BatchNorm; ghost clipping on a
Swin, now trained by book-keeping clipping) on the device where they happened. Tolerances are fp32 reduction-order ones, not logic
checks (those run on the CPU in float64)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedbench.config import load_run_config
from fedbench.engine import train

pytestmark = [pytest.mark.cuda, pytest.mark.engine]

BASE = [
    "data.name=digits",
    "model.name=cnn",
    "partition.clients=6",
    "fl.participation=0.5",
    "fl.rounds=2",
    "fl.local_steps=3",
    "fl.batch_size=16",
    "eval.every=1",
    "runtime.checkpoint_every=0",
]


def _final(tmp_path: Path, name: str, items: list[str]) -> tuple[dict, list[torch.Tensor]]:
    cfg = load_run_config(None, [*BASE, *items])
    result = train(cfg, tmp_path / name, console=None, save_model=True)
    assert result.summary["status"] == "completed", result.summary
    state = torch.load(result.run_dir / "model.pt", map_location="cpu")
    return result.summary, [t.double() for t in state.values() if t.is_floating_point()]


def _close(a: list[torch.Tensor], b: list[torch.Tensor], rtol: float) -> None:
    num = sum(float((x - y).norm() ** 2) for x, y in zip(a, b, strict=True)) ** 0.5
    den = sum(float(x.norm() ** 2) for x in a) ** 0.5
    assert num <= rtol * den, f"relative difference {num / den:.2e} > {rtol:.0e}"


def test_cuda_trains_like_the_cpu(tmp_path: Path) -> None:
    _, cpu = _final(tmp_path, "cpu", ["runtime.device=cpu"])
    _, gpu = _final(tmp_path, "gpu", ["runtime.device=cuda", "runtime.cuda_graphs=off"])
    _close(cpu, gpu, 1e-4)


def test_cuda_graphs_replay_the_eager_steps(tmp_path: Path) -> None:
    _, eager = _final(tmp_path, "eager", ["runtime.device=cuda", "runtime.cuda_graphs=off"])
    _, graphed = _final(tmp_path, "graphs", ["runtime.device=cuda", "runtime.cuda_graphs=on"])
    _close(eager, graphed, 1e-4)


def test_vectorized_equals_sequential_on_cuda(tmp_path: Path) -> None:
    items = ["runtime.device=cuda", "runtime.cuda_graphs=off"]
    _, seq = _final(tmp_path, "seq", items)
    _, vec = _final(tmp_path, "vec", [*items, "runtime.engine=vectorized"])
    _close(seq, vec, 1e-4)


@pytest.mark.parametrize("engine", ["sequential", "vectorized"])
def test_bf16_with_batchnorm_trains_on_cuda(tmp_path: Path, engine: str) -> None:
    """Table 1's ResNet-18 BN in bf16: the vectorised engine crashed here."""
    summary, _ = _final(
        tmp_path,
        engine,
        [
            "runtime.device=cuda",
            "model.name=resnet18",
            "model.norm=bn",
            "runtime.precision=bf16",
            f"runtime.engine={engine}",
        ],
    )
    assert summary["final"]["train_loss"] < 10


@pytest.mark.parametrize(
    "model", [["model.name=cnn"], ["model.name=resnet18", "model.norm=bn"]], ids=["cnn", "bn"]
)
def test_graphed_vectorized_steps_replay_the_eager_ones(tmp_path: Path, model: list[str]) -> None:
    """The vectorised executor's whole stacked step as a CUDA graph (fedbench.engine.graphed):
    captured (graph count > 0), every step a replay, and the weights equal to the eager
    vectorised engine's in fp32 to float rounding (FedAdamW, chunks of 2 and 1 clients)."""
    from fedbench.engine.graphed import StepGraphs
    from fedbench.engine.run import select_engine
    from fedbench.engine.run_folder import RunFolder
    from fedbench.engine.schedule import local_lr
    from fedbench.engine.setup import prepare_run

    finals = {}
    for graphs in ("off", "on"):
        items = [*BASE, *model, "runtime.device=cuda", "runtime.engine=vectorized"]
        items += [
            "algorithm.name=fedadamw",
            "runtime.client_chunk=2",
            f"runtime.cuda_graphs={graphs}",
        ]
        cfg = load_run_config(None, items)
        engine = select_engine(prepare_run(cfg), RunFolder(tmp_path / graphs), None)
        for r in range(cfg.fl.rounds):
            engine._round(r, local_lr(cfg.algorithm, r, cfg.fl.rounds))
        torch.cuda.synchronize()
        step_graphs = getattr(engine, "step_graphs", None)
        if graphs == "on":
            assert engine.plan is not None and engine.plan["cuda_graphs"].value == "on"
            assert isinstance(step_graphs, StepGraphs) and step_graphs.captured > 0
            steps = cfg.fl.rounds * 2 * cfg.fl.local_steps  # 3 clients a round: chunks 2 + 1
            assert step_graphs.replays >= steps  # every step of every chunk replayed
        else:
            assert step_graphs is None
        finals[graphs] = [t.detach().double().cpu() for t in [*engine.x, *engine.global_buffers]]
    _close(finals["off"], finals["on"], 1e-4)


def test_tf32_trains_close_to_fp32_on_cuda(tmp_path: Path) -> None:
    _, fp32 = _final(tmp_path, "fp32", ["runtime.device=cuda", "runtime.precision=fp32"])
    _, tf32 = _final(tmp_path, "tf32", ["runtime.device=cuda", "runtime.precision=tf32"])
    _close(fp32, tf32, 5e-2)


def test_private_steps_on_a_swin_on_cuda() -> None:
    """Swin's window attention (ghost clipping crashed on it, then fell back to vmap): `auto`
    keeps book-keeping clipping after the first batch's check, close to vmap's clipped sum; ghost
    clipping asked for is refused."""
    from fedbench.config import ModelConfig
    from fedbench.engine.plan import clipping_method
    from fedbench.errors import FedbenchError
    from fedbench.models import build_model
    from fedbench.privacy.mechanism import PrivateGradient

    torch.manual_seed(0)
    cfg = ModelConfig(name="swin_micro", lora={"r": 2, "alpha": 4, "dropout": 0.0})
    model = build_model(cfg, (3, 32, 32), 4).cuda().eval()  # no drop-path: the same function
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    params = [p for p in model.parameters() if p.requires_grad]
    x, y = torch.randn(4, 3, 32, 32, device="cuda"), torch.randint(0, 4, (4,), device="cuda")
    mech = PrivateGradient(
        model,
        params,
        noise_multiplier=0.0,
        clip=0.05,
        batch_size=4,
        method=clipping_method(model),
        strict=False,
    )
    got = mech.clipped_sum(x, y)
    assert mech.method == "bk" and mech.fallback is None
    mech.close()
    want = PrivateGradient(
        model, params, noise_multiplier=0.0, clip=0.05, batch_size=4, method="vmap"
    ).clipped_sum(x, y)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-6 * float(b.abs().max()))
    model.train()  # Opacus' hooks record in train mode only
    with pytest.raises(FedbenchError, match="reshapes the batch"):
        PrivateGradient(
            model, params, noise_multiplier=0.0, clip=0.05, batch_size=4, method="ghost"
        ).clipped_sum(x, y)
