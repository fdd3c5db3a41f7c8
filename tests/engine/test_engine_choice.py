"""Which runs the vectorised engine takes: an algorithm whose local rule is not elementwise
(`supports_vectorized = False`) falls back to the sequential engine."""

from types import SimpleNamespace

from torch import nn

from fedbench.algorithms import ALGORITHMS
from fedbench.config import load_run_config
from fedbench.engine.vectorized import vectorized_unsupported


def test_non_elementwise_rules_are_declared() -> None:
    assert not ALGORITHMS.get("dp_fedavg_ls").supports_vectorized  # FFT over each tensor
    # Two gradients per step, both from the stacked executor's gradient oracle.
    assert ALGORITHMS.get("dp_fedsam").supports_vectorized
    assert ALGORITHMS.get("fafed").supports_vectorized
    assert ALGORITHMS.get("moon").supports_vectorized  # the representation term, stacked
    assert ALGORITHMS.get("dp_fedavg").supports_vectorized
    assert ALGORITHMS.get("fedexp").supports_vectorized


def test_vectorized_unsupported_reads_the_algorithm_flag() -> None:
    cfg = load_run_config(None, ["algorithm.name=fedavg", "runtime.engine=vectorized"])
    model = nn.Linear(3, 2)
    for flag, expected in ((True, None), (False, "non-elementwise local rule")):
        setup = SimpleNamespace(
            cfg=cfg,
            model=model,
            algorithm=SimpleNamespace(
                supports_vectorized=flag, uses_full_gradient=lambda params: False
            ),
        )
        reason = vectorized_unsupported(setup)
        assert reason is None if expected is None else expected in reason


def _resolved(items: list[str]) -> tuple[str, str]:
    """(the plan's executor, the engine select_engine builds) for a digits run on the CPU."""
    import tempfile
    from pathlib import Path

    from fedbench.engine.plan import execution_plan
    from fedbench.engine.run import select_engine
    from fedbench.engine.run_folder import RunFolder
    from fedbench.engine.setup import prepare_run

    cfg = load_run_config(None, ["data.name=digits", "runtime.device=cpu", *items])
    setup = prepare_run(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        return execution_plan(setup).executor, select_engine(setup, RunFolder(Path(tmp)), None).name


def test_auto_is_the_default_and_keeps_the_sequential_run_ids() -> None:
    default = load_run_config(None, [])
    assert default.runtime.engine == "auto"
    sequential = load_run_config(None, ["runtime.engine=sequential"])
    vectorized = load_run_config(None, ["runtime.engine=vectorized"])
    assert default.run_id() == sequential.run_id() != vectorized.run_id()


def test_auto_takes_the_engine_measured_fastest() -> None:
    """Vectorised only for a compiled small model on the CPU (the one regime where it was
    measured faster); sequential for the eager runs, the big models and what it cannot run."""
    assert _resolved([]) == ("sequential", "sequential")
    assert _resolved(["runtime.compile=true"]) == ("vectorized", "vectorized")
    assert _resolved(["runtime.compile=true", "fl.local_steps_min=1"]) == (
        "sequential",
        "sequential",
    )
    # Two gradients per step, or a representation term, stack like any rule (the stacked
    # executor's gradient oracle).
    for name in ("fedsam", "fafed", "moon"):
        assert _resolved(["runtime.compile=true", f"algorithm.name={name}"]) == (
            "vectorized",
            "vectorized",
        )
    big = ["runtime.compile=true", "model.name=resnet18"]  # 11M parameters
    assert _resolved(big) == ("sequential", "sequential")
    # An explicit choice is kept.
    assert _resolved(["runtime.engine=vectorized"]) == ("vectorized", "vectorized")
