"""runtime.precision / cuda_graphs / channels_last: what a CPU must do (and refuse)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from fedbench.config import load_run_config, parse_run_config
from fedbench.engine.accelerate import GraphedForward, apply_precision, has_conv, to_channels_last
from fedbench.engine.loop import Engine
from fedbench.engine.plan import check_cuda_graphs, execution_plan, sequential_graphs_unsupported
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.setup import prepare_run
from fedbench.errors import FedbenchError

CPU = torch.device("cpu")
TINY = [
    "model.name=cnn",
    "partition.clients=4",
    "fl.participation=0.5",
    "fl.rounds=1",
    "fl.local_steps=2",
    "fl.batch_size=16",
]


def test_precision_gives_the_autocast_dtype() -> None:
    assert apply_precision("fp32", CPU) is None
    assert apply_precision("tf32", CPU) is None  # TF32 is a CUDA feature: plain fp32 here
    assert apply_precision("bf16", CPU) is torch.bfloat16


def test_tf32_on_the_cpu_trains_exactly_like_fp32(tmp_path: Path) -> None:
    found = []
    for precision in ("fp32", "tf32"):
        # Pinned to the CPU: on a machine with CUDA, auto would pick the GPU, where TF32 differs.
        cfg = load_run_config(None, [*TINY, f"runtime.precision={precision}", "runtime.device=cpu"])
        setup = prepare_run(cfg)
        engine = Engine(execution_plan(setup), setup, RunFolder(tmp_path / precision), None)
        engine._round(0, 0.01)
        found.append(engine.x)
    for a, b in zip(*found, strict=True):
        assert torch.equal(a, b)


def test_cuda_graphs_on_a_cpu_is_a_user_error(run_cli, tmp_path: Path) -> None:
    cfg = load_run_config(None, ["runtime.device=cpu", "runtime.cuda_graphs=on"])
    with pytest.raises(FedbenchError, match="cuda_graphs on needs a CUDA device"):
        check_cuda_graphs(cfg, CPU)
    code, _, err = run_cli(
        "train", "--set", "runtime.device=cpu", "--set", "runtime.cuda_graphs=on",
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert code == 2 and "cuda_graphs" in err
    assert not (tmp_path / "out").exists()


def test_auto_is_off_on_the_cpu_and_for_private_runs() -> None:
    cfg = load_run_config(None, [])
    assert cfg.runtime.cuda_graphs == "auto"
    assert sequential_graphs_unsupported(cfg, CPU) == "no CUDA device"
    assert sequential_graphs_unsupported(cfg, torch.device("cuda")) is None
    private = load_run_config(None, ["algorithm.name=dp_fedavg", "privacy.noise_multiplier=1.0"])
    assert "private" in str(sequential_graphs_unsupported(private, torch.device("cuda")))


def _channels_last(*items: str) -> tuple[str, str]:
    setup = prepare_run(load_run_config(None, [*TINY, "runtime.device=cpu", *items]))
    choice = execution_plan(setup)["channels_last"]
    return choice.value, choice.reason


def test_channels_last_for_float32_convnets_on_the_cpu_sequential_executor() -> None:
    cfg = load_run_config(None, [*TINY, "runtime.device=cpu", "fl.rounds=1"])
    setup = prepare_run(cfg)
    plan = execution_plan(setup)
    assert has_conv(setup.model) and plan.channels_last and plan.executor == "sequential"
    assert "oneDNN" in plan["channels_last"].reason
    Engine(plan, setup, RunFolder(Path("unused")), None)
    # (a conv of one input channel is contiguous in both layouts: the second one tells)
    conv = [p for p in setup.model.parameters() if p.ndim == 4][-1]
    assert conv.is_contiguous(memory_format=torch.channels_last) and not conv.is_contiguous()
    assert _channels_last("model.name=mlp") == ("off", "no convolution")
    assert _channels_last("runtime.engine=vectorized")[0] == "off"


def test_float64_convnets_stay_nchw_on_the_cpu() -> None:
    # The golden runs (float64) keep their recorded bits: oneDNN has no float64 convolution.
    setup = prepare_run(load_run_config(None, [*TINY, "runtime.device=cpu"]))
    setup.model.double()
    choice = execution_plan(setup)["channels_last"]
    assert choice.value == "off" and "torch.float64" in choice.reason
    model = nn.Sequential(nn.Conv2d(1, 2, 3))
    to_channels_last(model)
    assert model[0].weight.is_contiguous(memory_format=torch.channels_last)


def test_speed_settings_do_not_change_the_run_id() -> None:
    base = load_run_config(None, []).run_id()
    for item in ("runtime.cuda_graphs=off", "runtime.client_chunk=3"):
        assert load_run_config(None, [item]).run_id() == base
    assert load_run_config(None, ["runtime.precision=tf32"]).run_id() != base


@pytest.mark.cuda
def test_graphed_forward_gives_the_eager_gradient() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(64, 5))
    model = model.cuda().train()
    x, y = torch.randn(8, 3, 6, 6, device="cuda"), torch.randint(0, 5, (8,), device="cuda")
    params = list(model.parameters())
    eager = torch.autograd.grad(nn.functional.cross_entropy(model(x), y), params)
    graphed = GraphedForward(model)
    for _ in range(2):  # capture, then replay
        got = torch.autograd.grad(nn.functional.cross_entropy(graphed(x), y), params)
    for a, b in zip(eager, got, strict=True):
        torch.testing.assert_close(b, a)


def test_speed_settings_survive_a_config_round_trip() -> None:
    for items in ([], ["runtime.client_chunk=3", "runtime.cuda_graphs=off"]):
        cfg = load_run_config(None, items)
        assert parse_run_config(cfg.to_dict()) == cfg
    with pytest.raises(FedbenchError, match="client_chunk"):
        load_run_config(None, ["runtime.client_chunk=0"])
