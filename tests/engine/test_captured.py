"""The whole client step as one compiled graph (`runtime.compile`, fedbench.engine.captured):
0 graph breaks for the paper's models and the capturable local rules (torch._dynamo.explain,
tracing only), and the compiled run equals the eager one in float64."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from fedbench.algorithms import ALGORITHMS, RoundInfo
from fedbench.config import ModelConfig, load_run_config
from fedbench.engine.captured import CapturedStep, captured_unsupported
from fedbench.engine.loop import Engine
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.schedule import local_lr
from fedbench.engine.setup import param_spec, prepare_run
from fedbench.models import build_model

pytestmark = pytest.mark.engine

LORA = {"r": 2, "alpha": 4, "dropout": 0.0}
#: (model config, input shape, integer inputs): the paper tables' model families, small.
MODELS = {
    "resnet18-bn": ({"name": "resnet18", "norm": "bn"}, (3, 16, 16), False),
    "resnet18-gn": ({"name": "resnet18", "norm": "gn"}, (3, 16, 16), False),
    "vit-tiny": ({"name": "vit_tiny"}, (3, 32, 32), False),
    "vit-lora": ({"name": "vit_micro", "lora": LORA}, (3, 16, 16), False),
    "swin-lora": ({"name": "swin_micro", "lora": LORA}, (3, 32, 32), False),
    "roberta-lora": ({"name": "roberta_micro", "lora": LORA}, (16,), True),
}
CAPTURABLE = sorted(name for name, cls in ALGORITHMS.items() if cls.capturable_step)


def _explain(model: torch.nn.Module, algorithm_name: str, shape: tuple[int, ...], ids: bool):
    """torch._dynamo.explain of one captured step (nothing is compiled or run by inductor)."""
    cls = ALGORITHMS.get(algorithm_name)
    algorithm = cls(cls.Params(name=algorithm_name), param_spec(model), num_clients=4)
    step = CapturedStep(model.train(), algorithm, 1.0, None, torch.device("cpu"), lambda f: f)
    x0 = [t.detach().clone() for t in step.y]
    info = RoundInfo(2, 0.01, 3, 4, 2)
    local = algorithm.client_begin(x0, algorithm.init_server_state(x0), None, info)
    xb = torch.randint(0, 100, (2, *shape)) if ids else torch.randn(2, *shape)
    yb = torch.tensor([0, 1])
    tensors = dataclasses.replace(info, lr=step.scalar(0.01), round=step.scalar(2))
    return torch._dynamo.explain(step.eager_step)(
        step.y, step.buffers, local, xb, yb, step.scalar(1), tensors
    )


def _reasons(explained) -> list[str]:
    return [b.reason.splitlines()[0] for b in explained.break_reasons]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_the_paper_models_step_is_one_graph(name: str) -> None:
    cfg, shape, ids = MODELS[name]
    torch.manual_seed(0)
    model = build_model(ModelConfig(**cfg), shape, 10 if not ids else 2)
    explained = _explain(model, "fedadamw", shape, ids)
    assert explained.graph_break_count == 0, _reasons(explained)
    assert explained.graph_count == 1


@pytest.mark.parametrize("algorithm", CAPTURABLE)
def test_every_capturable_rule_is_one_graph(algorithm: str) -> None:
    torch.manual_seed(0)
    model = build_model(ModelConfig(name="cnn"), (1, 8, 8), 10)
    explained = _explain(model, algorithm, (1, 8, 8), False)
    assert explained.graph_break_count == 0, _reasons(explained)


def test_the_table1_rules_are_capturable() -> None:
    table1 = {"fedavg", "scaffold", "fedcm", "local_adam", "fedadam", "fedlada", "local_adamw"}
    assert table1 | {"fedadamw"} <= set(CAPTURABLE)


def test_a_data_dependent_branch_is_a_graph_break() -> None:
    """The check can fail: MimeLite's `if k == 1` on a tensor k breaks the graph, which is
    why MimeLite does not declare capturable_step."""
    cls = ALGORITHMS.get("mimelite")
    assert not cls.capturable_step
    cls.capturable_step = True
    try:
        model = build_model(ModelConfig(name="cnn"), (1, 8, 8), 10)
        explained = _explain(model, "mimelite", (1, 8, 8), False)
    finally:
        cls.capturable_step = False
    assert explained.graph_break_count > 0


BASE = [
    "seed=3",
    "data.name=digits",
    "partition.clients=6",
    "fl.participation=0.5",
    "fl.rounds=2",
    "fl.local_steps=3",
    "fl.batch_size=16",
    "algorithm.grad_clip=1.0",
    "runtime.device=cpu",
    "runtime.checkpoint_every=0",
]


def _batchnorm_net() -> torch.nn.Module:
    """A conv net with BatchNorm, small enough to trace in seconds."""
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, padding=1),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 8 * 8, 10),
    )


def _engine(items: list[str], tmp: Path, dtype: torch.dtype = torch.float64) -> Engine:
    batchnorm = "batchnorm" in items
    setup = prepare_run(load_run_config(None, [*BASE, *(i for i in items if i != "batchnorm")]))
    if batchnorm:
        model = _batchnorm_net()
        cls = ALGORITHMS.get(setup.cfg.algorithm.name)
        algorithm = cls(setup.cfg.algorithm, param_spec(model), num_clients=setup.num_clients)
        setup = dataclasses.replace(setup, model=model, algorithm=algorithm)
    setup.model.to(dtype)
    d = setup.data
    setup.data = dataclasses.replace(d, x_train=d.x_train.to(dtype), x_test=d.x_test.to(dtype))
    return Engine(setup, RunFolder(tmp), None)


def _rounds(engine: Engine) -> None:
    cfg = engine.cfg
    for r in range(cfg.fl.rounds):
        engine._round(r, local_lr(cfg.algorithm, r, cfg.fl.rounds))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("items", "backend"),
    [
        (["algorithm.name=fedadamw", "algorithm.eps=1e-3"], "inductor"),
        (["algorithm.name=scaffold", "batchnorm"], "aot_eager"),
        (["algorithm.name=fedlada", "algorithm.lr_schedule=cosine",
          "algorithm.lr_schedule_scope=local"], "aot_eager"),
    ],
    ids=["fedadamw-inductor", "scaffold-batchnorm", "fedlada-local-schedule"],
)  # fmt: skip
def test_the_compiled_step_trains_like_the_eager_one(
    items: list[str], backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compiled step against the eager loop, float64: the same weights, server state and
    BatchNorm statistics after two rounds. One case compiles with inductor (CPU C++ kernels,
    ~30 s); the others trace the same graph through AOTAutograd (functionalisation, the
    backward) and run it eagerly, which checks the capture at a tenth of the time."""
    if backend != "inductor":
        compile_fn = torch.compile
        monkeypatch.setattr(
            torch, "compile", lambda fn, **kw: compile_fn(fn, backend=backend, **kw)
        )
    eager = _engine(items, tmp_path / "e")
    compiled = _engine([*items, "runtime.compile=true"], tmp_path / "c")
    assert eager.compiled is None and compiled.compiled == "step"
    assert eager.local_training.captured is None and compiled.local_training.captured
    _rounds(eager)
    _rounds(compiled)
    assert compiled.x[0].dtype == torch.float64
    for a, b in zip(
        eager.x + eager.global_buffers, compiled.x + compiled.global_buffers, strict=True
    ):
        torch.testing.assert_close(b, a, atol=1e-10, rtol=1e-10)
    moved = sum(
        float((a - b).abs().sum())
        for a, b in zip(eager.x, _engine(items, tmp_path / "i").x, strict=True)
    )
    assert moved > 1e-3  # the two rounds did train


def test_what_is_compiled_when_the_step_cannot_be() -> None:
    """MimeLite (a branch on k), FedSAM (two gradients a step), MOON (a representation term)
    and DP (per-sample clipping) compile the forward only; the reason is stated."""

    def algorithm(name: str):
        cls = ALGORITHMS.get(name)
        return cls(cls.Params(name=name), param_spec(torch.nn.Linear(2, 2)), num_clients=2)

    assert "Python numbers" in captured_unsupported(algorithm("mimelite"), private=False)
    assert "several gradients" in captured_unsupported(algorithm("fedsam"), private=False)
    assert "representation" in captured_unsupported(algorithm("moon"), private=False)
    assert "DP" in captured_unsupported(algorithm("fedavg"), private=True)
    assert captured_unsupported(algorithm("fedadamw"), private=False) is None


def test_a_compile_run_of_an_uncapturable_rule_compiles_the_forward(tmp_path: Path) -> None:
    engine = _engine(["algorithm.name=mimelite", "runtime.compile=true"], tmp_path, torch.float32)
    assert engine.compiled == "forward" and engine.local_training.captured is None
