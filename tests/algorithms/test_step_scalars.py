"""RoundInfo's step scalars (`Scalar`): Python numbers in the engine, 0-d tensors inside a
captured step (fedbench.engine.captured.step_scalars). The code that reads `lr` (step sizes,
their sum, the rules' hooks) is correct for both; the int round is read as `round_index`."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
from torch import Tensor

from fedbench.algorithms import ALGORITHMS, RoundInfo
from fedbench.engine.captured import step_scalars
from tests.algorithms.harness import TOL, Problem, assert_close, flatten, make, run_federated

CPU = torch.device("cpu")


def test_round_index_is_the_int_round_and_refuses_a_captured_steps_tensor() -> None:
    info = RoundInfo(3, 0.1, 2, 4, 2)
    assert info.round_index == 3
    _, captured = step_scalars(1, info, CPU)
    assert isinstance(captured.round, Tensor) and captured.round.item() == 3.0
    assert isinstance(captured.lr, Tensor) and captured.lr.dtype == torch.float64
    with pytest.raises(TypeError, match="captured step"):
        _ = captured.round_index


def test_the_step_sizes_of_a_tensor_lr_are_its_tensors() -> None:
    """step_lr, lr_sum and at_step under a local cosine schedule: the same values, as tensors."""
    info = RoundInfo(1, 0.1, 4, 4, 2, step_schedule="cosine")
    tensor = replace(info, lr=torch.tensor(0.1, dtype=torch.float64))
    assert isinstance(tensor.lr_sum, Tensor)
    assert tensor.lr_sum.item() == pytest.approx(info.lr_sum, rel=1e-15)
    for k in range(1, 5):
        step = tensor.at_step(k)
        assert isinstance(step.lr, Tensor) and isinstance(step.lr_sum, Tensor)
        assert step.lr.item() == pytest.approx(info.step_lr(k), rel=1e-15)
        assert step.lr_sum.item() == pytest.approx(info.lr_sum, rel=1e-15)
    # A step scalar that is a tensor already stays one (moved, not copied through the host).
    _, again = step_scalars(1, tensor, CPU)
    assert again.lr is tensor.lr


#: The rules whose local step takes its scalars as tensors (`capturable_step`); FedExP's server
#: step needs every upload, which harness.run_federated does not keep (test_rule_contract does).
CAPTURABLE = sorted(
    name for name, cls in ALGORITHMS.items() if cls.capturable_step and not cls.uses_client_uploads
)


@pytest.mark.parametrize("name", CAPTURABLE)
def test_a_capturable_rule_runs_whole_rounds_on_a_tensor_lr(name: str) -> None:
    """Every hook of a capturable rule (client_begin, local_step, client_end, server_update)
    reads lr and lr_sum correctly as a 0-d tensor: two rounds equal the float lr's (float64).
    SCAFFOLD's c_i update divided by lr_sum through `alpha=`, which takes Python numbers only."""
    problem = Problem()
    x, server, _ = run_federated(make(name), problem, rounds=2, local_steps=3, lr=0.05)
    lr = torch.tensor(0.05, dtype=torch.float64)
    x_t, server_t, _ = run_federated(make(name), problem, rounds=2, local_steps=3, lr=lambda r: lr)
    assert_close(x_t, flatten(x), tol=TOL)
    for key, value in server.items():
        if isinstance(value, list):
            assert_close(server_t[key], flatten(value), tol=TOL)
