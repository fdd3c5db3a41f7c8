"""The execution plan is what runs: a matrix of configs (both executors x precision x compile,
the CUDA-graphed stacked step with the CPU stand-in, sample-level DP with each clipping method,
seeds trained together) trained for real, each checked by instrumenting what ran against the
plan's entries and summary.json's `plan`:

- the executor: the class of the engine whose `begin` ran;
- the precision: the autocast state the model's training forwards saw (in eager runs: a
  compiled graph runs no Python hook);
- compile: which compiled function was called (the model: `forward`; a step method: `step`;
  the vmapped gradient: `gradient`), none when the plan says off;
- CUDA graphs: captured and replayed stacked steps (`EagerReplay` stands in for CUDA on the CPU,
  as in tests/engine/test_graphed.py); none when the plan says off;
- clipping: the mechanism's method whose clipped sum produced the per-sample norms;
- seeds together: the group the run was trained in.

The planted-bug tests make one engine ignore one plan entry and show the check fails.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from fedbench.config import RunConfig, load_run_config
from fedbench.engine import loop, plan, vectorized
from fedbench.engine.graphed import EagerReplay, StepGraphs
from fedbench.engine.loop import Engine
from fedbench.engine.plan import execution_plan
from fedbench.engine.run import RunResult
from fedbench.engine.run_seeds import train_together
from fedbench.engine.setup import RunSetup, prepare_run
from fedbench.privacy.mechanism import PrivateGradient

pytestmark = [pytest.mark.engine, pytest.mark.slow]

BASE = [
    "data.name=digits",
    "model.name=cnn",
    "partition.clients=4",
    "fl.participation=0.5",
    "fl.rounds=1",
    "fl.local_steps=2",
    "fl.batch_size=8",
    "eval.every=1",
    "eval.train_subset=32",
    "runtime.checkpoint_every=0",
    "runtime.device=cpu",
]

DP = ["algorithm.name=dp_fedavg", "privacy.clip=0.5", "privacy.noise_multiplier=1.0"]

#: name -> (config items, seeds trained together, the stacked step graphed by the stand-in)
MATRIX: dict[str, tuple[list[str], int, bool]] = {
    f"{engine}-{precision}-{'compiled' if compiled else 'eager'}": (
        ["algorithm.name=fedadamw", f"runtime.engine={engine}",
         f"runtime.precision={precision}", f"runtime.compile={str(compiled).lower()}"],
        1,
        False,
    )
    for engine in ("sequential", "vectorized")
    for precision in ("fp32", "tf32", "bf16")
    for compiled in (False, True)
}  # fmt: skip
MATRIX.update(
    {
        # A rule with two gradients per step: the forward (sequential) or the vmapped
        # gradient (vectorised) is compiled, not the whole step.
        "fedsam-sequential-compiled": (
            ["algorithm.name=fedsam", "runtime.engine=sequential", "runtime.compile=true"],
            1,
            False,
        ),
        "fedsam-vectorized-compiled": (
            ["algorithm.name=fedsam", "runtime.engine=vectorized", "runtime.compile=true"],
            1,
            False,
        ),
        # auto: a compiled small model on the CPU is stacked
        "auto-compiled": (["algorithm.name=fedavg", "runtime.compile=true"], 1, False),
        "vectorized-graphed": (["algorithm.name=fedadamw", "runtime.engine=vectorized"], 1, True),
        **{
            f"dp-{method}": ([*DP, f"privacy.clipping={method}"], 1, False)
            for method in ("auto", "bk", "ghost", "vmap")
        },
        # the vectorised executor asked for a private run: the plan falls back
        "dp-vectorized-fallback": ([*DP, "runtime.engine=vectorized"], 1, False),
        "dp-bf16": ([*DP, "privacy.clipping=bk", "runtime.precision=bf16"], 1, False),
        "seeds-together": (
            ["algorithm.name=fedadamw", "runtime.engine=vectorized", "runtime.seeds_together=2"],
            2,
            False,
        ),
        # seeds_together with the sequential executor: a config that loads, and the plan (not
        # the config) says the seeds train one by one (runtime.threads 1: the first run leaves
        # the process' thread state to the second, which an auto layout entry would read)
        "seeds-together-sequential": (
            [
                "algorithm.name=fedadamw",
                "runtime.engine=sequential",
                "runtime.seeds_together=2",
                "runtime.threads=1",
            ],
            2,
            False,
        ),
    }
)


@dataclass
class Ran:
    """What the instruments saw during one training call."""

    engines: list[str] = field(default_factory=list)
    autocast: set[str] = field(default_factory=set)
    compiled: Counter[str] = field(default_factory=Counter)
    clipping: set[str] = field(default_factory=set)
    graphs: list[StepGraphs] = field(default_factory=list)
    #: Each run's plan, made independently just before training: the CPU layout entries read
    #: the process' thread state (a count set with torch.set_num_threads is kept), which the
    #: run itself then sets, so a plan made after it could differ in its reasons.
    planned: list[dict[str, Any]] = field(default_factory=list)


class _Counted:
    """A compiled callable that counts its calls under `tag` (attributes pass through)."""

    def __init__(self, compiled: Any, tag: str, ran: Ran) -> None:
        self._compiled, self._tag, self._ran = compiled, tag, ran

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._ran.compiled[self._tag] += 1
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._compiled, name)


def _tag(fn: Any) -> str:
    if isinstance(fn, nn.Module):
        return "forward"
    return "step" if "step" in getattr(fn, "__name__", "") else "gradient"


@contextmanager
def instrumented(
    patch: pytest.MonkeyPatch,
) -> Iterator[tuple[Ran, Callable[[RunConfig], RunSetup]]]:
    """Instruments on the engines, torch.compile (aot_eager: no code generation), the DP
    mechanism and the step graphs; yields what they saw and the `prepare` that hooks the model."""
    ran = Ran()
    compile_fn = torch.compile

    def compile_counted(fn: Any = None, **kw: Any) -> Any:
        return _Counted(compile_fn(fn, **{**kw, "backend": "aot_eager"}), _tag(fn), ran)

    patch.setattr(torch, "compile", compile_counted)
    begin = Engine.begin

    def begin_recorded(engine: Engine) -> Any:
        ran.engines.append(type(engine).__name__)
        return begin(engine)

    patch.setattr(Engine, "begin", begin_recorded)
    for method in ("bk", "ghost", "vmap"):
        original = getattr(PrivateGradient, f"_{method}_clipped_sum")

        def clipped(self: PrivateGradient, x: Any, y: Any, _f: Any = original, _m: str = method):
            ran.clipping.add(_m)
            return _f(self, x, y)

        patch.setattr(PrivateGradient, f"_{method}_clipped_sum", clipped)

    def graphs(strict: bool) -> StepGraphs:
        ran.graphs.append(StepGraphs(EagerReplay, strict=strict))
        return ran.graphs[-1]

    patch.setattr(vectorized, "cuda_step_graphs", graphs)

    def seen(module: nn.Module, args: Any) -> None:
        if module.training and not torch.compiler.is_compiling():
            on = torch.is_autocast_enabled("cpu")
            ran.autocast.add(str(torch.get_autocast_dtype("cpu")) if on else "off")

    def prepare(cfg: RunConfig) -> RunSetup:
        setup = prepare_run(cfg)
        setup.model.register_forward_pre_hook(seen)
        return setup

    yield ran, prepare


def _graphed_on_the_cpu(patch: pytest.MonkeyPatch) -> None:
    """The CPU stands in for CUDA: the plan graphs a capturable stacked step."""
    from fedbench.engine.captured import captured_unsupported

    def unsupported(cfg: RunConfig, device: torch.device, algorithm: Any) -> str | None:
        return captured_unsupported(algorithm, private=False)

    patch.setattr(plan, "stacked_graphs_unsupported", unsupported)


def train_case(name: str, out: Path, patch: pytest.MonkeyPatch) -> tuple[list[RunResult], Ran]:
    items, seeds, graphed = MATRIX[name]
    cfgs = [load_run_config(None, [*BASE, *items, f"seed={seed}"]) for seed in range(seeds)]
    if graphed:
        _graphed_on_the_cpu(patch)
    with instrumented(patch) as (ran, prepare):
        ran.planned = [execution_plan(prepare_run(cfg), group=seeds).to_dict() for cfg in cfgs]
        results = train_together(cfgs, out, prepare=prepare)
    assert all(isinstance(r, RunResult) for r in results), results
    return [r for r in results if isinstance(r, RunResult)], ran


def check_plan_is_what_ran(name: str, results: list[RunResult], ran: Ran) -> None:
    """Every run's summary.json `plan` is the plan made for its config, and what ran is it."""
    _, seeds, _ = MATRIX[name]
    for seed, result in enumerate(results):
        summary = json.loads((result.run_dir / "summary.json").read_text())
        assert summary["status"] == "completed", summary
        planned = ran.planned[seed]
        assert summary["plan"] == planned
        entry = {what: choice["value"] for what, choice in planned.items()}
        # what summary.json says ran
        assert summary["engine"] == entry["executor"]
        assert summary["compiled"] == (None if entry["compile"] == "off" else entry["compile"])
        assert summary["dp_clipping"] == entry.get("clipping")
        group = summary["seeds_together"]["group"] if summary["seeds_together"] else 1
        assert str(group) == entry["seeds_together"]
    # what the instruments saw
    executor = {"sequential": "Engine", "vectorized": "VectorizedEngine"}[entry["executor"]]
    assert ran.engines == [executor] * seeds
    precision = {"fp32": "off", "tf32": "off", "bf16": str(torch.bfloat16)}[entry["precision"]]
    if entry["compile"] == "off":  # the model's training forwards run eagerly
        assert ran.autocast == {precision}
    else:
        assert ran.autocast <= {precision}
    if entry["compile"] == "off":
        assert not ran.compiled
    else:
        assert set(ran.compiled) == {entry["compile"]}, ran.compiled
    replays = sum(g.replays for g in ran.graphs)
    assert (replays > 0) == (entry["cuda_graphs"] == "on"), (replays, entry["cuda_graphs"])
    assert ran.clipping == ({entry["clipping"]} if "clipping" in entry else set())


@pytest.fixture
def single_thread() -> Iterator[None]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("name", sorted(MATRIX))
def test_the_plan_is_what_ran(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, single_thread: None
) -> None:
    results, ran = train_case(name, tmp_path, monkeypatch)
    check_plan_is_what_ran(name, results, ran)


def test_the_matrix_covers_every_choice() -> None:
    """Each executor with each precision and compile value, graphs on and off, each clipping
    method, and seeds together appear in the matrix (by the plans of its configs)."""
    seen: set[tuple[str, str]] = set()
    for items, seeds, graphed in MATRIX.values():
        cfg = load_run_config(None, [*BASE, *items])
        with pytest.MonkeyPatch.context() as patch:
            if graphed:
                _graphed_on_the_cpu(patch)
            planned = execution_plan(prepare_run(cfg), group=seeds)
        seen |= {(c.what, c.value) for c in planned.choices}
        seen |= {(f"{planned.executor}/compile", planned.compile)}
        seen |= {(f"{planned.executor}/precision", planned.precision)}
    for executor in ("sequential", "vectorized"):
        assert {v for w, v in seen if w == f"{executor}/precision"} == {"fp32", "tf32", "bf16"}
    assert {v for w, v in seen if w == "sequential/compile"} == {"off", "step", "forward"}
    assert {v for w, v in seen if w == "vectorized/compile"} == {"off", "step", "gradient"}
    assert {v for w, v in seen if w == "cuda_graphs"} == {"on", "off"}
    assert {v for w, v in seen if w == "clipping"} == {"bk", "ghost", "vmap"}
    assert ("seeds_together", "2") in seen


def _ignore_precision(patch: pytest.MonkeyPatch) -> None:
    patch.setattr(loop, "apply_precision", lambda precision, device: None)


def _ignore_compile(patch: pytest.MonkeyPatch) -> None:
    patch.setattr(
        vectorized.VectorizedEngine, "_compile_gradient_only", lambda self, why=None: None
    )


def _ignore_clipping(patch: pytest.MonkeyPatch) -> None:
    init = PrivateGradient.__init__

    def vmap_always(self: PrivateGradient, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **{**kwargs, "method": "vmap"})

    patch.setattr(PrivateGradient, "__init__", vmap_always)


def _ignore_graphs(patch: pytest.MonkeyPatch) -> None:
    init = vectorized.VectorizedEngine.__init__

    def eager_steps(self: vectorized.VectorizedEngine, *args: Any) -> None:
        init(self, *args)
        self.step_graphs = None

    patch.setattr(vectorized.VectorizedEngine, "__init__", eager_steps)


#: A planted bug (an engine that ignores one plan entry) and the matrix case it shows in.
PLANTED: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], str]] = {
    "precision": (_ignore_precision, "sequential-bf16-eager"),
    "compile": (_ignore_compile, "fedsam-vectorized-compiled"),
    "clipping": (_ignore_clipping, "dp-bk"),
    "graphs": (_ignore_graphs, "vectorized-graphed"),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_an_engine_that_ignores_a_plan_entry_fails_the_check(
    bug: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, single_thread: None
) -> None:
    plant, name = PLANTED[bug]
    results, ran = train_case(name, tmp_path / "right", monkeypatch)
    check_plan_is_what_ran(name, results, ran)  # the case passes without the bug
    with pytest.MonkeyPatch.context() as patch:
        plant(patch)
        results, ran = train_case(name, tmp_path / "planted", patch)
        with pytest.raises(AssertionError):
            check_plan_is_what_ran(name, results, ran)
