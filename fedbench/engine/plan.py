"""The execution plan of a run: every choice of how its client steps execute, each with its
reason, made in one place.

`execution_plan(setup)` takes the prepared run (config, algorithm, model, device) and returns
the executor (sequential rows, or clients stacked over a leading dimension), the precision,
what `runtime.compile` compiles, CUDA graphs, the private clipping method, whether seeds
train together, and the CPU layout: threads, OpenMP wait policy and client processes
(fedbench.engine.layout). A choice that differs from what the config asked for (a fallback) is
an entry with `fallback: true` and its reason, never only a printed note: `fedbench train --print-plan`
prints the plan, and summary.json records it under `plan`.

The plan is the decision, not a description of it: the engines are built from it
(`Engine(plan, setup, ...)`) and read no `runtime.*` or `privacy.clipping` choice from the
config. The launcher's seed grouping (`seeds_group_size`), the estimate probe and the smoke
check's coverage (`paper_executor`), the estimate's private/non-private ratio
(`clipping_candidates`), a direct caller of the DP mechanism (`clipping_method`: the
mechanism takes a method and chooses none) and the bench suite ask it too.
tests/engine/test_plan_is_what_ran.py runs a matrix of configs and checks, by instrumenting what
ran, that each run did what its plan says.

Nothing here changes a result: every executor computes the same local steps (the engines agree
to float rounding; tests/engine/test_golden_runs.py holds them bitwise to recorded runs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch

from fedbench.algorithms import ALGORITHMS
from fedbench.algorithms.base import Algorithm
from fedbench.config import RunConfig
from fedbench.engine.accelerate import has_conv
from fedbench.engine.captured import captured_unsupported
from fedbench.engine.layout import layout_choices
from fedbench.engine.setup import RunSetup
from fedbench.errors import FedbenchError
from fedbench.personal.store import store_choice
from fedbench.privacy.book_keeping import bk_supported
from fedbench.privacy.mechanism import ghost_supported

ClippingMethod = Literal["bk", "ghost", "vmap"]


def vectorized_unsupported(setup: RunSetup) -> str | None:
    """Why this run cannot use the vectorised engine, or None when it can. The stacked step hands
    the rule a gradient oracle over the stacked rows (fedbench.engine.stacked.stacked_step), so
    rules with several gradients per step (FedSAM's ascent point, FAFED's two points) and MOON's
    representation term stack, as does Mime's full-batch gradient (`stacked.full_gradients`);
    what it cannot run (sample-level DP, a local rule that is not elementwise, clients of
    different K) says so here, and runs on the sequential executor."""
    return _vectorized_unsupported(setup.cfg, setup.algorithm.supports_vectorized)


def _vectorized_unsupported(cfg: RunConfig, elementwise: bool) -> str | None:
    if cfg.privacy is not None and cfg.privacy.level == "sample":
        return "DP training (per-sample clipping and noise) is not vectorised yet"
    if not elementwise:
        return f"algorithm {cfg.algorithm.name} has a non-elementwise local rule"
    if cfg.fl.local_steps_min is not None:
        return "fl.local_steps_min gives clients different numbers of local steps"
    return None


#: Below this many trainable parameters a model is "small" for `runtime.engine: auto`.
SMALL_MODEL = 1_000_000


@dataclass(frozen=True)
class Choice:
    """One decision of the plan."""

    what: str
    value: str
    reason: str
    #: The config asked for something else, which cannot run here (the reason says why).
    fallback: bool = False


@dataclass(frozen=True)
class ExecutionPlan:
    choices: tuple[Choice, ...]
    #: Choices asked for by name that must not fall back at run time: `cuda_graphs`
    #: (`runtime.cuda_graphs on`: a failed capture is an error) and `clipping` (bk or ghost
    #: asked: a batch size where it is not exact is an error, not vmap).
    required: frozenset[str] = frozenset()

    def __getitem__(self, what: str) -> Choice:
        for choice in self.choices:
            if choice.what == what:
                return choice
        raise KeyError(what)

    @property
    def executor(self) -> str:
        """`sequential` or `vectorized` (the engine that runs the rounds)."""
        return self["executor"].value

    @property
    def precision(self) -> str:
        """fp32, tf32 or bf16 (fedbench.engine.accelerate.apply_precision)."""
        return self["precision"].value

    @property
    def compile(self) -> str:
        """What is compiled: off, step (the whole client step), forward or gradient."""
        return self["compile"].value

    @property
    def cuda_graphs(self) -> bool:
        """The sequential forward + backward, or the vectorised stacked step, replayed."""
        return self["cuda_graphs"].value == "on"

    @property
    def channels_last(self) -> bool:
        return self["channels_last"].value == "on"

    @property
    def seeds_together(self) -> str:
        """How many seeds of a cell train in one stacked computation (`all`: every one)."""
        return self["seeds_together"].value

    @property
    def clipping(self) -> str | None:
        """bk, ghost or vmap for a sample-level DP run; None for any other run."""
        found = [c.value for c in self.choices if c.what == "clipping"]
        return found[0] if found else None

    @property
    def threads(self) -> int:
        """torch's threads in each process of the run (fedbench.engine.layout)."""
        return int(self["threads"].value)

    @property
    def client_processes(self) -> int:
        """The processes that train a round's clients (fedbench.engine.layout)."""
        return int(self["client_processes"].value)

    @property
    def fallbacks(self) -> list[Choice]:
        return [c for c in self.choices if c.fallback]

    def lines(self) -> list[str]:
        """One line per choice: `executor: sequential (why)`, fallbacks marked."""
        return [
            f"{c.what}: {c.value}" + (" [fallback]" if c.fallback else "") + f" ({c.reason})"
            for c in self.choices
        ]

    def to_dict(self) -> dict[str, Any]:
        """For summary.json: {what: {value, reason, fallback}}."""
        return {c.what: {k: v for k, v in asdict(c).items() if k != "what"} for c in self.choices}


def _executor(setup: RunSetup) -> Choice:
    """The engine `runtime.engine` names; for `auto`, the one measured fastest for the run
    (`executor_choice`)."""
    small = setup.algorithm.spec.d < SMALL_MODEL
    return executor_choice(setup.cfg, small, setup.device, vectorized_unsupported(setup))


def executor_choice(
    cfg: RunConfig, small: bool, device: torch.device, why_not: str | None
) -> Choice:
    """The executor of a run of `cfg` on `device` (`small`: under SMALL_MODEL parameters;
    `why_not`: why it cannot be vectorised, None when it can).

    Measured (docs/performance.md): on the CPU the sequential engine is faster than the
    vectorised one for every eager workload and the vectorised engine wins only compiled, on a
    small model (the digits CNN, 421k parameters: 788 vs 389 client steps/s for sequential +
    compile). On an H200 (2026-11-26, Table 1 shapes, K 10) the sequential engine in bf16 with
    CUDA graphs is ahead for ResNet-18 BN (278 vs vectorised bf16 163 client steps/s) and for
    ViT-Tiny (210 vs 196). So auto = vectorized for a compiled model under SMALL_MODEL
    parameters on the CPU where the run can be vectorised, else sequential."""
    asked = cfg.runtime.engine
    if asked == "sequential":
        return Choice("executor", "sequential", "runtime.engine sequential")
    if asked == "vectorized":
        if why_not is not None:
            return Choice("executor", "sequential", f"vectorized asked, but {why_not}", True)
        return Choice("executor", "vectorized", "runtime.engine vectorized")
    if cfg.runtime.compile and small and device.type == "cpu":
        if why_not is None:
            return Choice(
                "executor", "vectorized", "auto: a compiled model under 1M parameters on a CPU"
            )
        return Choice("executor", "sequential", f"auto: {why_not}")
    return Choice("executor", "sequential", "auto: measured fastest for this model and device")


def paper_executor(cfg: RunConfig) -> str:
    """The executor of a run of `cfg` with a paper-size model (over SMALL_MODEL parameters), from
    the config alone (no model built): what the estimate probe matches to the bench suite's
    rows and what the smoke check's covering set tells apart."""
    elementwise = ALGORITHMS.get(cfg.algorithm.name).supports_vectorized
    why_not = _vectorized_unsupported(cfg, elementwise)
    return executor_choice(cfg, False, torch.device("cpu"), why_not).value


def _compile(setup: RunSetup, executor: str) -> Choice:
    """What `runtime.compile` compiles: the whole step, or the forward / gradient alone."""
    if not setup.cfg.runtime.compile:
        return Choice("compile", "off", "runtime.compile false")
    private = setup.cfg.privacy is not None and setup.cfg.privacy.level == "sample"
    why_not = captured_unsupported(setup.algorithm, private)
    if why_not is None:
        return Choice("compile", "step", "forward, backward, clipping and the rule: one graph")
    part = "gradient" if executor == "vectorized" else "forward"
    return Choice("compile", part, f"the whole step is not captured: {why_not}", True)


def _precision(setup: RunSetup) -> Choice:
    precision = setup.cfg.runtime.precision
    if precision != "fp32" and setup.device.type == "cpu":
        return Choice("precision", precision, f"runtime.precision {precision} (emulated on a CPU)")
    return Choice("precision", precision, f"runtime.precision {precision}")


def _channels_last(setup: RunSetup, executor: str) -> Choice:
    """Whether a convolutional model keeps its weights and batches in NHWC. On CUDA, always. On
    the CPU, float32 convolutions run on oneDNN, whose NHWC kernels (and max-pooling's) beat
    NCHW ones: one thread, batch 32, forward + backward + SGD, measured on a 2-core AMD EPYC
    (benchmarks/channels_last.py): the digits `cnn` 1.3-1.6x, `cnn` and `cnn_bn` on 28x28 1.4x
    and 1.5x, LEAF's FEMNIST CNN 1.1x, ResNet-18 (GroupNorm) 1.0x. float64 convolutions (the
    golden runs) have no oneDNN kernel, so they stay NCHW; the vectorised executor's stacked
    step reads NCHW."""
    if not has_conv(setup.model):
        return Choice("channels_last", "off", "no convolution")
    if setup.device.type == "cuda":
        return Choice("channels_last", "on", "convolutions on CUDA take NHWC")
    if executor != "sequential":
        return Choice("channels_last", "off", "CPU: the vectorised step stacks NCHW batches")
    dtype = next(setup.model.parameters()).dtype
    if dtype != torch.float32:
        return Choice("channels_last", "off", f"CPU: {dtype} convolutions have no NHWC kernel")
    return Choice(
        "channels_last",
        "on",
        "CPU: oneDNN's NHWC convolutions and pooling (1.1-1.6x per step on the small CNNs)",
    )


def check_cuda_graphs(cfg: RunConfig, device: torch.device) -> None:
    """`runtime.cuda_graphs: on` where graphs cannot run is a user error (exit code 2), raised
    when the plan is made (before anything is written)."""
    if cfg.runtime.cuda_graphs != "on":
        return
    if device.type != "cuda":
        raise FedbenchError("runtime.cuda_graphs on needs a CUDA device; use auto or off")
    if cfg.privacy is not None or cfg.runtime.compile:
        raise FedbenchError(
            "runtime.cuda_graphs on cannot capture private or compiled steps; use auto or off"
        )


def sequential_graphs_unsupported(cfg: RunConfig, device: torch.device) -> str | None:
    """Why the sequential executor does not replay its forward + backward as CUDA graphs
    (None: it does, unless `runtime.cuda_graphs` is off)."""
    if device.type != "cuda":
        return "no CUDA device"
    if cfg.privacy is not None or cfg.runtime.compile:
        return "private or compiled steps are not graphed"
    return None


def stacked_graphs_unsupported(
    cfg: RunConfig, device: torch.device, algorithm: Algorithm
) -> str | None:
    """Why the vectorised executor does not replay its stacked step as a CUDA graph (None: it
    does, unless `runtime.cuda_graphs` is off; fedbench.engine.graphed)."""
    if device.type != "cuda":
        return "no CUDA device"
    if cfg.privacy is not None:
        return "private steps are not graphed"
    if cfg.runtime.compile:
        return "compiled steps are not graphed"
    return captured_unsupported(algorithm, private=False)


def _graphs(setup: RunSetup, executor: str) -> Choice:
    """CUDA graphs: the sequential executor's forward + backward (auto: on for CUDA runs that
    are neither private nor compiled), or the vectorised executor's whole stacked step
    (fedbench.engine.graphed) where its rule is capturable. `on` where graphs cannot run is a
    user error."""
    cfg = setup.cfg
    check_cuda_graphs(cfg, setup.device)
    if executor == "vectorized":
        why = stacked_graphs_unsupported(cfg, setup.device, setup.algorithm)
        what = "the stacked step (gradients, clipping, rule) replayed"
    else:
        why = sequential_graphs_unsupported(cfg, setup.device)
        what = "forward + backward replayed as CUDA graphs"
    if why is not None and cfg.runtime.cuda_graphs == "on":
        raise FedbenchError(
            f"runtime.cuda_graphs on cannot graph this {executor} run's step ({why}); "
            "use auto or off"
        )
    if cfg.runtime.cuda_graphs == "off":
        reason = "no CUDA device" if setup.device.type != "cuda" else "runtime.cuda_graphs off"
        return Choice("cuda_graphs", "off", reason)
    if why is None:
        return Choice("cuda_graphs", "on", what)
    if executor == "vectorized" and setup.device.type == "cuda":
        return Choice("cuda_graphs", "off", f"the stacked step is not captured: {why}")
    return Choice("cuda_graphs", "off", why)


def _clipping(setup: RunSetup) -> Choice | None:
    """The private clipping method of a sample-level DP run (None: not such a run). The first
    batch's exactness check may still fall back to vmap at run time: summary.json's
    `dp_clipping` then says so."""
    privacy = setup.cfg.privacy
    if privacy is None or privacy.level != "sample":
        return None
    if privacy.clipping != "auto":
        return Choice("clipping", privacy.clipping, f"privacy.clipping {privacy.clipping}")
    method = clipping_method(setup.model)
    return Choice("clipping", method, "auto: the fastest method with a rule for every layer")


#: The order `privacy.clipping: auto` tries the exact clipping methods in: the measured speed
#: order (bk fastest or tied on every model measured, ghost before vmap; the table in
#: fedbench.privacy.mechanism's docstring).
CLIPPING_ORDER: tuple[ClippingMethod, ...] = ("bk", "ghost", "vmap")


def clipping_method(model: torch.nn.Module) -> ClippingMethod:
    """The method `auto` clips `model`'s per-sample gradients with (the check at a batch size
    may still fall back to vmap): the first of CLIPPING_ORDER with a rule for every trainable
    layer (vmap traces any model)."""
    supported = {"bk": bk_supported, "ghost": ghost_supported}
    return next(m for m in CLIPPING_ORDER if m not in supported or supported[m](model))


def clipping_candidates(asked: str, measured_auto: str | None) -> list[str]:
    """The methods a run asking `privacy.clipping: asked` clips with, most likely first, where
    the model is not built (the estimate's private/non-private ratio lookup): the one named, or
    for auto the method auto chose when the ratio was measured, then CLIPPING_ORDER."""
    if asked != "auto":
        return [asked]
    return [m for m in (measured_auto, *CLIPPING_ORDER) if m is not None]


def seeds_group_size(cfg: RunConfig, runs: int, gpus: bool) -> int:
    """How many of a cell's `runs` seeds train together (`runtime.seeds_together`): the setting,
    or for `auto` all of them on a machine with GPUs and 1 without (CPU workers already train
    one run per core); 1 where `runtime.engine: sequential` rules the stacked executor out. The
    launcher groups a sweep's runs by it (fedbench.runner.seed_groups); the worker's plan
    (`_seeds`) then says, per run, whether it stacked."""
    asked = cfg.runtime.seeds_together
    if cfg.runtime.engine == "sequential":
        return 1
    if asked == "auto":
        return runs if gpus else 1
    return max(1, int(asked))


def _seeds(setup: RunSetup, executor: str, group: int | None) -> Choice:
    """The seeds trained together with this run: `group` runs (the worker stacked them,
    fedbench.engine.run_seeds), or without a group (a plan printed before training) what the
    setting asks for."""
    together = setup.cfg.runtime.seeds_together
    if together == 1:
        return Choice("seeds_together", "1", "runtime.seeds_together 1: each seed on its own")
    if executor != "vectorized":
        return Choice("seeds_together", "1", "seeds stack only on the vectorized executor", True)
    if group is not None:
        if group == 1:
            return Choice("seeds_together", "1", "no other seed of its cell to stack with here")
        return Choice(
            "seeds_together", str(group), f"trained with {group - 1} other seed(s) of its cell"
        )
    if together == "auto":
        gpu = setup.device.type == "cuda"
        value = "all" if gpu else "1"
        why = "every seed of the cell on a GPU" if gpu else "one seed per CPU worker"
        return Choice("seeds_together", value, f"auto: {why}")
    return Choice(
        "seeds_together",
        str(together),
        "a sweep trains the seeds of a cell in one stacked computation",
    )


def execution_plan(setup: RunSetup, group: int | None = None) -> ExecutionPlan:
    """Every execution choice of the run, with its reason (module docstring); `group`: the
    number of seeds the run trains with in one stacked computation, where known."""
    executor = _executor(setup)
    compiled = _compile(setup, executor.value)
    choices = [
        executor,
        _precision(setup),
        compiled,
        _graphs(setup, executor.value),
        _channels_last(setup, executor.value),
        _seeds(setup, executor.value, group),
    ]
    clipping = _clipping(setup)
    if clipping is not None:
        choices.append(clipping)
    small = setup.algorithm.spec.d < SMALL_MODEL
    layout = layout_choices(setup, executor.value, small, compiled.value != "off")
    choices.extend(Choice(*entry) for entry in layout)
    store = store_choice(setup.cfg, setup.algorithm, setup.num_clients)
    if store is not None:  # where personal / bounded client states live (fedbench.personal)
        choices.append(Choice("client_state_store", *store))
    runtime, privacy = setup.cfg.runtime, setup.cfg.privacy
    required = {"cuda_graphs"} if runtime.cuda_graphs == "on" else set()
    if clipping is not None and privacy is not None and privacy.clipping != "auto":
        required.add("clipping")
    return ExecutionPlan(tuple(choices), frozenset(required))
