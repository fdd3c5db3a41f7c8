"""fedadam / fedyogi / fedadagrad (Reddi et al. 2021, Algorithm 2), with and without bias
correction."""

import math

import pytest
import torch
from pydantic import ValidationError

from tests.algorithms.harness import Problem, assert_close, flatten, make, run_federated


def fedopt_reference(problem, variant, rounds, K, lr, wd, eta_g, b1, b2, tau, bias_correction):
    x = flatten(problem.x0())
    m = torch.zeros_like(x)
    v = torch.full_like(x, tau**2)
    for r in range(rounds):
        deltas = []
        for i in range(problem.N):
            y = x.clone()
            for _ in range(K):
                y = y - lr * (problem.flat_grad(y, i) + wd * y)
            deltas.append(y - x)
        d = torch.stack(deltas).mean(0)
        m = b1 * m + (1 - b1) * d
        if variant == "adam":
            v = b2 * v + (1 - b2) * d**2
        elif variant == "yogi":
            v = v - (1 - b2) * d**2 * torch.sign(v - d**2)
        else:
            v = v + d**2
        m_hat, v_hat = m, v
        if bias_correction:
            m_hat = m / (1 - b1 ** (r + 1))
            if variant != "adagrad":
                v_hat = v / (1 - b2 ** (r + 1))
        x = x + eta_g * m_hat / (v_hat.sqrt() + tau)
    return x


@pytest.mark.parametrize("bias_correction", [False, True])
@pytest.mark.parametrize("variant", ["adam", "yogi", "adagrad"])
def test_fedopt_three_rounds_by_hand(variant: str, bias_correction: bool) -> None:
    problem, K, lr, wd, eta_g, b1, b2, tau = Problem(), 3, 0.05, 0.01, 0.1, 0.8, 0.9, 0.01
    fields = {"beta1": b1, "tau": tau, "bias_correction": bias_correction}
    if variant != "adagrad":
        fields["beta2"] = b2
    alg = make(f"fed{variant}", weight_decay=wd, server_lr=eta_g, **fields)
    x, _, _ = run_federated(alg, problem, rounds=3, local_steps=K, lr=lr)
    ref = fedopt_reference(problem, variant, 3, K, lr, wd, eta_g, b1, b2, tau, bias_correction)
    assert_close(x, ref)


def test_fedadam_bias_correction_first_round_is_sign_like() -> None:
    # With bias correction m_hat = d and v_hat ~ d^2 after the first round (tau ~ 0), so every
    # coordinate moves by eta_g (Adam's first step is sign-like).
    problem = Problem()
    alg = make("fedadam", server_lr=0.01, tau=1e-9, bias_correction=True)
    x, _, _ = run_federated(alg, problem, rounds=1, local_steps=3, lr=0.05)
    step = (flatten(x) - flatten(problem.x0())).abs()
    assert torch.allclose(step, torch.full_like(step, 0.01), rtol=1e-4)


def test_fedopt_defaults_and_fields() -> None:
    for name in ("fedadam", "fedyogi"):
        p = make(name).params
        assert (p.beta1, p.beta2, p.tau, p.bias_correction) == (0.9, 0.99, 1e-3, False)
        assert (p.server_lr, p.lr, p.weight_decay) == (0.01, 0.1, 1e-3)
    with pytest.raises(ValidationError):
        make("fedadagrad", beta2=0.99)  # fedadagrad has no beta2
    assert math.isclose(make("fedadagrad").params.tau, 1e-3)
