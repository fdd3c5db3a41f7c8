"""Which runs the vectorised engine takes: an algorithm whose local rule is not elementwise
(`supports_vectorized = False`) falls back to the sequential engine."""

from types import SimpleNamespace

from torch import nn

from fedbench.algorithms import ALGORITHMS
from fedbench.config import load_run_config
from fedbench.engine.vectorized import vectorized_unsupported


def test_non_elementwise_rules_are_declared() -> None:
    assert not ALGORITHMS.get("dp_fedavg_ls").supports_vectorized  # FFT over each tensor
    assert not ALGORITHMS.get("dp_fedsam").supports_vectorized  # two-gradient oracle step
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
