"""Signum's rule by hand, in float64, through the hooks fedbench calls."""

import torch
from fedbench.algorithms import ALGORITHMS
from fedbench.algorithms.base import ParamSpec, RoundInfo

from fedbench_plugin_example.signum import Signum, SignumConfig


def test_two_local_steps_and_the_server_step_by_hand() -> None:
    params = SignumConfig(lr=0.01, beta=0.9)
    spec = ParamSpec(names=["w"], shapes=[torch.Size([3])], heads={})
    rule = Signum(params, spec, num_clients=1)
    info = RoundInfo(round=0, lr=0.01, local_steps=2, num_clients=1, sampled=1)
    x = [torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)]
    local = rule.client_begin(x, {}, None, info)
    y = [x[0].clone()]
    # m1 = 0.1 * g1 = (0.05, -0.1, 0): y1 = (1 - 0.01, -2 + 0.01, 3); the sign of 0 is 0
    rule.local_step(y, [torch.tensor([0.5, -1.0, 0.0], dtype=torch.float64)], local, 1, info)
    assert torch.allclose(y[0], torch.tensor([0.99, -1.99, 3.0], dtype=torch.float64), atol=1e-12)
    # m2 = 0.9 * m1 + 0.1 * g2 = (0.045 - 0.2, -0.09 + 0.01, 0) = (-0.155, -0.08, 0)
    rule.local_step(y, [torch.tensor([-2.0, 0.1, 0.0], dtype=torch.float64)], local, 2, info)
    m = torch.tensor([-0.155, -0.08, 0.0], dtype=torch.float64)
    assert torch.allclose(local["m"][0], m, atol=1e-12)
    assert torch.allclose(y[0], torch.tensor([1.0, -1.98, 3.0], dtype=torch.float64), atol=1e-12)
    upload, state = rule.client_end(y, x, local, None, info)
    assert state is None
    rule.server_update(x, {"delta": upload["delta"]}, {}, info)  # x + 1.0 * mean delta
    assert torch.allclose(x[0], torch.tensor([1.0, -1.98, 3.0], dtype=torch.float64), atol=1e-12)


def test_registered_with_its_dp_twin() -> None:
    assert ALGORITHMS.get("signum") is Signum
    assert ALGORITHMS.get("dp_signum").dp_twin_of == "signum"
