"""finish_round: the one end of round both engines share (weighted mean, finiteness, buffers)."""

from __future__ import annotations

import pytest
import torch

from fedbench.algorithms import ALGORITHMS, ParamSpec, RoundInfo
from fedbench.engine.aggregation import FiniteWatch, RoundResults, finish_round
from fedbench.engine.dispatch import OpCounter
from fedbench.errors import DivergedError

SPEC = ParamSpec(names=["w"], shapes=[torch.Size([2])], heads={})


def _fedavg(server_lr: float = 0.5):
    cls = ALGORITHMS.get("fedavg")
    return cls(cls.Params(name="fedavg", server_lr=server_lr), SPEC, num_clients=2)


def _d(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def test_weighted_mean_update_and_buffers() -> None:
    info = RoundInfo(0, 0.1, 1, 2, 2)
    results = RoundResults(diagnostics=True)
    # Client buffers: a float running mean and an integer step counter (BatchNorm's pair).
    results.add({"delta": [_d(1.0, 2.0)]}, 1.0, buffers=[_d(0.0, 4.0), torch.tensor(7)])
    results.add({"delta": [_d(4.0, -1.0)]}, 2.0, buffers=[_d(3.0, 1.0), torch.tensor(9)])
    x = [_d(10.0, 10.0)]
    global_buffers = [_d(0.0, 0.0), torch.tensor(0)]
    found = finish_round(results, _fedavg(), x, {}, global_buffers, info, FiniteWatch())
    # mean delta = (1*[1,2] + 2*[4,-1]) / 3 = [3, 0]; x <- x + 0.5 * mean.
    torch.testing.assert_close(x[0], _d(11.5, 10.0), atol=1e-12, rtol=0)
    torch.testing.assert_close(global_buffers[0], _d(2.0, 2.0), atol=1e-12, rtol=0)
    assert int(global_buffers[1]) == 7  # the first client's counter
    # drift = (1*||[-2,2]||^2 + 2*||[1,-1]||^2) / 3 = (8 + 4) / 3
    assert found is not None and found["client_drift"] == pytest.approx(4.0, rel=1e-12)
    assert found["v_spread"] is None


def test_a_non_finite_update_is_recorded_on_the_device_and_named_when_checked() -> None:
    """finish_round reads nothing back; the watch names the FIRST non-finite round (4 here)
    when the engine checks it, even after later rounds (finite or not) were observed."""
    watch = FiniteWatch()
    for r, value in ((0, 1.0), (3, float("nan")), (4, 2.0), (5, float("inf"))):
        results = RoundResults(diagnostics=False)
        results.add({"delta": [_d(value, 0.0)]}, 1.0)
        with OpCounter() as ops:
            finish_round(
                results, _fedavg(), [_d(1.0, 1.0)], {}, [], RoundInfo(r, 0.1, 1, 2, 1), watch
            )
        assert ops.syncs == {}
        if r == 0:
            watch.check()  # finite so far: nothing raised
    with pytest.raises(DivergedError, match="round 4") as info:
        watch.check()
    assert info.value.round == 4


def test_an_empty_watch_passes() -> None:
    FiniteWatch().check()
