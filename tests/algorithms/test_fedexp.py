"""fedexp: eta_g = max(1, sum_i ||Delta_i||^2 / (2|S|(||Delta_bar||^2 + eps))), x <- x + eta_g *
Delta_bar (Jhunjhunwala et al., ICLR 2023, Algorithm 1), by hand in float64 with eps = 1e-3."""

import pytest
import torch

from fedbench.algorithms import ALGORITHMS, ClientUpload, ParamSpec, RoundInfo

SPEC = ParamSpec(names=["w", "b"], shapes=[torch.Size([2]), torch.Size([1])], heads={})
INFO = RoundInfo(round=0, lr=0.1, local_steps=2, num_clients=5, sampled=3)


def _t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def _server_step(deltas, weights, **fields) -> tuple[list[torch.Tensor], float]:
    """One FedExP server step from x = ([0.5, -1], [2]) given the clients' Delta_i."""
    cls = ALGORITHMS.get("fedexp")
    alg = cls(cls.Params(**fields), SPEC, num_clients=5)
    uploads = [
        ClientUpload(i, w, {"delta": [_t(*d[:2]), _t(d[2])]})
        for i, (d, w) in enumerate(zip(deltas, weights, strict=True))
    ]
    total = sum(weights)
    mean = [
        sum(w * u.tensors["delta"][j] for u, w in zip(uploads, weights, strict=True)) / total
        for j in range(2)
    ]
    x = [_t(0.5, -1.0), _t(2.0)]
    server = alg.init_server_state(x)
    alg.server_update_with_uploads(x, {"delta": mean}, uploads, server, INFO)
    return x, server["step_size"]


def _assert_x(x: list[torch.Tensor], expected: list[float]) -> None:
    torch.testing.assert_close(torch.cat(x), _t(*expected), rtol=0, atol=1e-12)


def test_disagreeing_clients_extrapolate() -> None:
    # Delta_bar = (2/3, -1/3 | 1): ||Delta_bar||^2 = 14/9; sum_i ||Delta_i||^2 = 4 + 1 + 9 = 14.
    x, step = _server_step([(2, 0, 0), (0, -1, 0), (0, 0, 3)], [1.0, 1.0, 1.0])
    eta = 14 / (2 * 3 * (14 / 9 + 1e-3))  # 1.49904...: eps shows at 1e-12
    assert step == pytest.approx(eta, rel=0, abs=1e-12) and eta > 1.49
    _assert_x(x, [0.5 + eta * 2 / 3, -1 - eta / 3, 2 + eta])


def test_agreeing_clients_take_the_plain_fedavg_step() -> None:
    # Delta_bar = (0, 1 | 1): 12 / (2*3*(2 + 1e-3)) = 0.9995 < 1, so eta_g = 1.
    x, step = _server_step([(1, 2, 0), (-1, 0, 2), (0, 1, 1)], [1.0, 1.0, 1.0])
    assert step == 1.0
    _assert_x(x, [0.5, 0.0, 3.0])


def test_sample_weights_and_server_lr() -> None:
    # w = (1, 3): Delta_bar = (1, 0 | -1.5), ||.||^2 = 3.25; sum_i w_i ||Delta_i||^2 = 16 + 12.
    x, step = _server_step([(4, 0, 0), (0, 0, -2)], [1.0, 3.0], server_lr=0.5)
    eta = 28 / (2 * 4 * (3.25 + 1e-3))  # 1.07659...
    assert step == pytest.approx(eta, rel=0, abs=1e-12)
    _assert_x(x, [0.5 + 0.5 * eta, -1.0, 2 - 0.5 * eta * 1.5])


def test_fedexp_declares_what_it_needs() -> None:
    cls = ALGORITHMS.get("fedexp")
    params = cls.Params()
    assert (params.eps, params.lr, params.weight_decay) == (1e-3, 0.1, 1e-3)
    assert cls.uses_client_uploads and not cls.supports_privacy
    assert cls.comm_up_label == "d" and "dp_fedexp" not in ALGORITHMS
    with pytest.raises(TypeError, match="server_update_with_uploads"):
        cls(params, SPEC, num_clients=1).server_update([_t(0.0)], {}, {}, INFO)


def test_the_harness_runs_fedexp_through_the_engines_round() -> None:
    # The harness drives the engine's round protocol, which keeps every upload for a rule that
    # `uses_client_uploads`: two rounds of local SGD (no weight decay) then FedExP's step.
    from tests.algorithms.harness import Problem, flatten, make, run_federated

    problem = Problem()
    x, server, _ = run_federated(
        make("fedexp", weight_decay=0.0), problem, rounds=2, local_steps=2, lr=0.1
    )
    ref = flatten(problem.x0())
    for _ in range(2):
        deltas = []
        for i in range(problem.N):
            y = ref.clone()
            for _ in range(2):
                y = y - 0.1 * problem.flat_grad(y, i)
            deltas.append(y - ref)
        mean = sum(deltas) / problem.N
        spread = sum(float(d @ d) for d in deltas)
        eta = max(1.0, spread / (2 * problem.N * (float(mean @ mean) + 1e-3)))
        ref = ref + eta * mean
    assert server["step_size"] == pytest.approx(eta, rel=1e-12)
    torch.testing.assert_close(flatten(x), ref, rtol=1e-12, atol=1e-12)
