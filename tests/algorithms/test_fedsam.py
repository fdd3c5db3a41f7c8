"""fedsam: the hand rule (g1 at y, g2 at y + rho g1/||g1||, SGD step with g2) over rounds, and
DP-FedSAM as the same rule (one implementation, two gradients counted per step)."""

import torch

from fedbench.algorithms import ALGORITHMS
from tests.algorithms.harness import Problem, assert_close, flatten, make, run_federated


def fedsam_reference(problem, rounds, K, lr, wd, rho, eta_g=1.0):
    x = flatten(problem.x0())
    for _ in range(rounds):
        deltas = []
        for i in range(problem.N):
            y = x.clone()
            for _ in range(K):
                g1 = problem.flat_grad(y, i)
                e = rho * g1 / (g1.norm() + 1e-12)
                g2 = problem.flat_grad(y + e, i)
                y = y - lr * (g2 + wd * y)
            deltas.append(y - x)
        x = x + eta_g * torch.stack(deltas).mean(0)
    return x


def test_fedsam_two_rounds_by_hand() -> None:
    problem = Problem(clients=3)
    alg = make("fedsam", clients=3, weight_decay=0.01, rho=0.2, server_lr=0.9)
    x, _, _ = run_federated(alg, problem, rounds=2, local_steps=3, lr=0.05, oracle=True)
    assert_close(x, fedsam_reference(problem, 2, 3, 0.05, 0.01, 0.2, 0.9))
    # rho = 0 is FedAvg
    sam0 = make("fedsam", clients=3, weight_decay=0.01, rho=0.0)
    x0, _, _ = run_federated(sam0, problem, rounds=2, local_steps=3, lr=0.05, oracle=True)
    avg, _, _ = run_federated(
        make("fedavg", clients=3, weight_decay=0.01), problem, rounds=2, local_steps=3, lr=0.05
    )
    assert_close(x0, flatten(avg))


def test_dp_fedsam_is_fedsams_rule() -> None:
    fedsam, dp = ALGORITHMS.get("fedsam"), ALGORITHMS.get("dp_fedsam")
    assert issubclass(dp, fedsam) and dp.requires_privacy and not fedsam.requires_privacy
    assert dp.local_step_with_oracle is fedsam.local_step_with_oracle
    assert (fedsam.gradients_per_step, dp.gradients_per_step) == (2, 2)
