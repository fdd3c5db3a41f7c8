"""The execution plan of a run: every choice of how its client steps execute, each with its
reason, made in one place.

`execution_plan(setup)` takes the prepared run (config, algorithm, model, device) and returns
the executor (sequential rows, or clients stacked over a leading dimension), the precision,
what `runtime.compile` compiles, CUDA graphs, the private clipping method, whether seeds
train together, and the CPU layout: threads, OpenMP wait policy and client processes
(fedbench.engine.layout). A choice that differs from what the config asked for (a fallback) is an entry
with `fallback: true` and its reason, never only a printed note: `fedbench train --print-plan`
prints the plan, and summary.json records it under `plan`.

Nothing here changes a result: every executor computes the same local steps (the engines agree
to float rounding; tests/engine/test_golden_runs.py holds them bitwise to recorded runs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from fedbench.engine.accelerate import cuda_graphs_wanted, has_conv
from fedbench.engine.captured import captured_unsupported
from fedbench.engine.graphed import stacked_graphs_unsupported
from fedbench.engine.layout import layout_choices
from fedbench.engine.setup import RunSetup
from fedbench.errors import FedbenchError


def vectorized_unsupported(setup: RunSetup) -> str | None:
    """Why this run cannot use the vectorised engine, or None when it can. The stacked step hands
    the rule a gradient oracle over the stacked rows (fedbench.engine.stacked.stacked_step), so
    rules with several gradients per step (FedSAM's ascent point, FAFED's two points) and MOON's
    representation term stack, as does Mime's full-batch gradient (`stacked.full_gradients`);
    what it cannot run (sample-level DP, a local rule that is not elementwise, clients of
    different K) says so here, and runs on the sequential executor."""
    if setup.cfg.privacy is not None and setup.cfg.privacy.level == "sample":
        return "DP training (per-sample clipping and noise) is not vectorised yet"
    algorithm, name = setup.algorithm, setup.cfg.algorithm.name
    if not algorithm.supports_vectorized:
        return f"algorithm {name} has a non-elementwise local rule"
    if setup.cfg.fl.local_steps_min is not None:
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
    """The engine `runtime.engine` names; for `auto`, the one measured fastest for the run.

    Measured (docs/performance.md): on the CPU the sequential engine is faster than the
    vectorised one for every eager workload and the vectorised engine wins only compiled, on a
    small model (the digits CNN, 421k parameters: 788 vs 389 client steps/s for sequential +
    compile). On an H200 (2026-11-26, Table 1 shapes, K 10) the sequential engine in bf16 with
    CUDA graphs is ahead for ResNet-18 BN (278 vs vectorised bf16 163 client steps/s) and for
    ViT-Tiny (210 vs 196). So auto = vectorized for a compiled model under SMALL_MODEL
    parameters on the CPU where the run can be vectorised, else sequential."""
    asked = setup.cfg.runtime.engine
    why_not = vectorized_unsupported(setup)
    if asked == "sequential":
        return Choice("executor", "sequential", "runtime.engine sequential")
    if asked == "vectorized":
        if why_not is not None:
            return Choice("executor", "sequential", f"vectorized asked, but {why_not}", True)
        return Choice("executor", "vectorized", "runtime.engine vectorized")
    small = setup.algorithm.spec.d < SMALL_MODEL
    if setup.cfg.runtime.compile and small and setup.device.type == "cpu":
        if why_not is None:
            return Choice(
                "executor", "vectorized", "auto: a compiled model under 1M parameters on a CPU"
            )
        return Choice("executor", "sequential", f"auto: {why_not}")
    return Choice("executor", "sequential", "auto: measured fastest for this model and device")


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


def _graphs(setup: RunSetup, executor: str) -> Choice:
    """CUDA graphs: the sequential executor's forward + backward, or the vectorised executor's
    whole stacked step (fedbench.engine.graphed) where its rule is capturable. `on` where the
    vectorised step cannot be graphed is a user error (the other cases: check_cuda_graphs)."""
    cfg = setup.cfg
    if executor == "vectorized":
        why = stacked_graphs_unsupported(cfg, setup.device, setup.algorithm)
        if why is None and cfg.runtime.cuda_graphs != "off":
            return Choice(
                "cuda_graphs", "on", "the stacked step (gradients, clipping, rule) replayed"
            )
        if why is not None and cfg.runtime.cuda_graphs == "on":
            raise FedbenchError(
                f"runtime.cuda_graphs on cannot graph this vectorized run's step ({why}); "
                "use auto or off"
            )
    elif cuda_graphs_wanted(cfg, setup.device):
        return Choice("cuda_graphs", "on", "forward + backward replayed as CUDA graphs")
    if setup.device.type != "cuda":
        return Choice("cuda_graphs", "off", "no CUDA device")
    if cfg.runtime.cuda_graphs == "off":
        return Choice("cuda_graphs", "off", "runtime.cuda_graphs off")
    if executor == "vectorized":
        return Choice("cuda_graphs", "off", f"the stacked step is not captured: {why}")
    return Choice("cuda_graphs", "off", "private or compiled steps are not graphed")


def _clipping(setup: RunSetup) -> Choice | None:
    """The private clipping method of a sample-level DP run (None: not such a run). The first
    batch's exactness check may still fall back to vmap at run time: summary.json's
    `dp_clipping` then says so."""
    privacy = setup.cfg.privacy
    if privacy is None or privacy.level != "sample":
        return None
    if privacy.clipping != "auto":
        return Choice("clipping", privacy.clipping, f"privacy.clipping {privacy.clipping}")
    from fedbench.privacy.mechanism import auto_method

    method = auto_method(setup.model)
    return Choice("clipping", method, "auto: the fastest method with a rule for every layer")


def _seeds(setup: RunSetup, executor: str) -> Choice:
    together = setup.cfg.runtime.seeds_together
    if together == 1:
        return Choice("seeds_together", "1", "runtime.seeds_together 1: each seed on its own")
    if executor != "vectorized":
        return Choice("seeds_together", "1", "seeds stack only on the vectorized executor", True)
    return Choice(
        "seeds_together",
        str(together),
        "a sweep trains the seeds of a cell in one stacked computation",
    )


def execution_plan(setup: RunSetup) -> ExecutionPlan:
    """Every execution choice of the run, with its reason (module docstring)."""
    executor = _executor(setup)
    choices = [
        executor,
        _precision(setup),
        _compile(setup, executor.value),
        _graphs(setup, executor.value),
        Choice(
            "channels_last",
            "on" if setup.device.type == "cuda" and has_conv(setup.model) else "off",
            "convolutions on CUDA take NHWC" if setup.device.type == "cuda" else "CPU: NCHW",
        ),
        _seeds(setup, executor.value),
    ]
    clipping = _clipping(setup)
    if clipping is not None:
        choices.append(clipping)
    small = setup.algorithm.spec.d < SMALL_MODEL
    choices.extend(Choice(*entry) for entry in layout_choices(setup, executor.value, small))
    return ExecutionPlan(tuple(choices))
