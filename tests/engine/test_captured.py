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
from fedbench.engine.captured import CapturedStep, captured_unsupported, step_scalars
from fedbench.engine.loop import Engine
from fedbench.engine.plan import execution_plan
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.schedule import local_lr
from fedbench.engine.setup import param_spec, prepare_run
from fedbench.models import build_model
from tests.engine.nets import batchnorm_net, build_engine, with_model

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
    k, tensors = step_scalars(1, info, torch.device("cpu"))
    return torch._dynamo.explain(step.eager_step)(step.y, step.buffers, local, xb, yb, k, tensors)


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
    "runtime.engine=sequential",  # the plan of these runs is the sequential engine's
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


def _engine(items: list[str], tmp: Path, dtype: torch.dtype = torch.float64) -> Engine:
    batchnorm = "batchnorm" in items
    setup = prepare_run(load_run_config(None, [*BASE, *(i for i in items if i != "batchnorm")]))
    if batchnorm:
        setup = with_model(setup, batchnorm_net(0))
    setup.model.to(dtype)
    d = setup.data
    setup.data = dataclasses.replace(d, x_train=d.x_train.to(dtype), x_test=d.x_test.to(dtype))
    return Engine(execution_plan(setup), setup, RunFolder(tmp), None)


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


def _vectorized(items: list[str], tmp: Path) -> Engine:
    from fedbench.engine.vectorized import VectorizedEngine

    eager = _engine(items, tmp)  # the float64 setup; its engine is not used
    return build_engine(VectorizedEngine, eager.setup, RunFolder(tmp / "v"))


@pytest.mark.slow
@pytest.mark.parametrize(
    "items", [["algorithm.name=fedadamw", "algorithm.eps=1e-3"], ["algorithm.name=scaffold",
              "batchnorm"]], ids=["fedadamw", "scaffold-batchnorm"],
)  # fmt: skip
def test_the_compiled_vectorised_step_trains_like_the_eager_one(
    items: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The vectorised engine's stacked step (vmap over clients, per-client clipping, the rule
    on stacked tensors) as one graph: 0 breaks, and the run equals the eager vectorised one in
    float64 (traced through AOTAutograd, run eagerly: the capture, not inductor's kernels)."""
    compile_fn = torch.compile
    monkeypatch.setattr(
        torch, "compile", lambda fn, **kw: compile_fn(fn, backend="aot_eager", **kw)
    )
    eager = _vectorized(items, tmp_path / "e")
    compiled = _vectorized([*items, "runtime.compile=true"], tmp_path / "c")
    assert eager.compiled is None and compiled.compiled == "step" and compiled.tensor_scalars
    _rounds(eager)
    _rounds(compiled)
    for a, b in zip(
        eager.x + eager.global_buffers, compiled.x + compiled.global_buffers, strict=True
    ):
        torch.testing.assert_close(b, a, atol=1e-10, rtol=1e-10)


def test_the_vectorised_step_of_a_paper_model_is_one_graph(tmp_path: Path) -> None:
    """ResNet-18 with BatchNorm, stacked over 2 clients: vmap's BatchNorm rule, the per-client
    clipping and FedAdamW's rule trace as one graph."""
    engine = _vectorized(["algorithm.name=fedadamw", "model.name=resnet18", "model.norm=bn"],
                         tmp_path)  # fmt: skip
    n, x = 2, engine.x
    y = [t.unsqueeze(0).repeat(n, *([1] * t.ndim)) for t in x]
    buffers = {
        name: b.unsqueeze(0).repeat(n, *([1] * b.ndim))
        for name, b in zip(engine.buffer_names, engine.global_buffers, strict=True)
    }
    info = RoundInfo(1, 0.01, 3, 6, 2)
    from fedbench.engine.client_state import stack_states

    alg = engine.setup.algorithm
    local = stack_states([alg.client_begin(x, engine.server, None, info) for _ in range(n)])
    xb = torch.randn(n, 4, 1, 8, 8, dtype=torch.float64)
    yb = torch.randint(0, 10, (n, 4))
    k, tensors = step_scalars(1, info, torch.device("cpu"))
    explained = torch._dynamo.explain(engine._stacked_step)(
        y, buffers, local, xb, yb, None, k, tensors
    )
    assert explained.graph_break_count == 0, _reasons(explained)


@pytest.mark.slow
def test_a_second_run_in_the_process_gets_its_own_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs of a sweep train one after the other in one process, with the same shapes and other
    hyperparameters: the second must not replay the first's graph (coupled decay instead of
    decoupled, baked in), although the guards on the step's owner are dropped
    (compile_per_owner)."""
    compile_fn = torch.compile
    monkeypatch.setattr(
        torch, "compile", lambda fn, **kw: compile_fn(fn, backend="aot_eager", **kw)
    )
    first = ["algorithm.name=fedadamw", "algorithm.alpha=0.5", "algorithm.weight_decay=0.01"]
    second = ["algorithm.name=fedadamw", "algorithm.decoupled=false", "algorithm.weight_decay=0.5"]
    _rounds(_engine([*first, "runtime.compile=true"], tmp_path / "a"))
    compiled = _engine([*second, "runtime.compile=true"], tmp_path / "b")
    eager = _engine(second, tmp_path / "e")
    _rounds(compiled)
    _rounds(eager)
    for a, b in zip(eager.x, compiled.x, strict=True):
        torch.testing.assert_close(b, a, atol=1e-10, rtol=1e-10)


def test_the_guard_filter_drops_the_owner_only() -> None:
    from types import SimpleNamespace

    from fedbench.engine.captured import fixed_for_the_run

    names = ["self", "self.algorithm.params.beta1", "self.constants['w']", "y", "info.lr",
             "local['m'][0]", "selfish", ""]  # fmt: skip
    kept = fixed_for_the_run([SimpleNamespace(name=n) for n in names])
    assert kept == [False, False, False, True, True, True, True, True]


@pytest.mark.parametrize("engine", ["sequential", "vectorized"])
def test_the_compiled_step_trains_under_bf16_autocast(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CPU autocast (bf16) inside the captured step, BatchNorm included: it trains (finite,
    moved) and stays close to the fp32 eager run."""
    from fedbench.engine.vectorized import VectorizedEngine

    compile_fn = torch.compile
    monkeypatch.setattr(
        torch, "compile", lambda fn, **kw: compile_fn(fn, backend="aot_eager", **kw)
    )
    items = ["algorithm.name=fedavg", "batchnorm", "algorithm.lr=0.05"]
    reference = _engine(items, tmp_path / "r", torch.float32)
    cls = Engine if engine == "sequential" else VectorizedEngine
    bf16 = _engine([*items, "runtime.compile=true", "runtime.precision=bf16"], tmp_path / "b",
                   torch.float32)  # fmt: skip
    engine_under_test = build_engine(cls, bf16.setup, RunFolder(tmp_path / "c"))
    assert engine_under_test.compiled == "step"
    start = [t.clone() for t in engine_under_test.x]
    _rounds(reference)
    _rounds(engine_under_test)
    num = sum(
        float((a - b).norm() ** 2) for a, b in zip(reference.x, engine_under_test.x, strict=True)
    )
    den = sum(float((a - s).norm() ** 2) for a, s in zip(reference.x, start, strict=True))
    assert all(bool(torch.isfinite(t).all()) for t in engine_under_test.x)
    assert den > 0 and num / den < 0.05  # bf16 moved the weights as fp32 did, to 5% of the step


class BackendFailed(torch._dynamo.exc.TorchDynamoException):
    """What dynamo raises when a backend (inductor) fails, without its version's signature."""


def test_a_failed_compile_falls_back_to_the_eager_step_for_good() -> None:
    """Compiling fails before the graph runs: the eager twin takes the same call, and every
    later one; the reason is kept (summary.json's compile_fallback) and told once."""
    from fedbench.engine.captured import CompiledOrEager

    calls: list[str] = []
    heard: list[str] = []

    def compiled(x: int) -> int:
        calls.append("compiled")
        raise BackendFailed("KeyError: 'buf78'")

    def eager(x: int) -> int:
        calls.append("eager")
        return x + 1

    step = CompiledOrEager(compiled, eager, heard.append)
    assert step(1) == 2 and step(2) == 3
    assert calls == ["compiled", "eager", "eager"]
    assert step.fallback is not None and "BackendFailed: KeyError: 'buf78'" in step.fallback
    assert heard == [step.fallback]


def test_other_errors_are_not_swallowed() -> None:
    from fedbench.engine.captured import CompiledOrEager

    def compiled(x: int) -> int:
        raise ValueError("a bug in the step itself")

    with pytest.raises(ValueError):
        CompiledOrEager(compiled, lambda x: x)(1)
