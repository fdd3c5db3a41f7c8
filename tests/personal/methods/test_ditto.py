"""ditto: FedAvg on x plus the personal model v_i <- v_i - eta_p (g(v_i) + wd v_i + lambda
(v_i - x^r)), computed by hand over rounds with clients that skip rounds (v_i persists)."""

import torch

from fedbench.algorithms import ALGORITHMS
from fedbench.algorithms.base import StepOracle
from tests.algorithms.harness import (
    Problem,
    assert_close,
    flatten,
    make,
    run_federated,
    unflatten,
)


def ditto_reference(problem, sampled, K, lr, wd, lam, plr, eta_g=1.0):
    x = flatten(problem.x0())
    personal: dict[int, torch.Tensor] = {}
    for clients in sampled:
        deltas = []
        for i in clients:
            y, v = x.clone(), personal.get(i, x.clone())
            for _ in range(K):
                g = problem.flat_grad(y, i)
                gv = problem.flat_grad(v, i)
                y = y - lr * (g + wd * y)
                v = v - plr * (gv + wd * v + lam * (v - x))
            personal[i] = v
            deltas.append(y - x)
        x = x + eta_g * torch.stack(deltas).mean(0)
    return x, personal


def test_ditto_by_hand_with_persisting_personal_models() -> None:
    problem = Problem(clients=3)
    sampled = [[0, 1], [1, 2], [0, 2]]
    alg = make("ditto", clients=3, weight_decay=0.01, lam=0.5, personal_lr=0.03, lr=0.05)
    x, _, states = run_federated(
        alg, problem, rounds=3, local_steps=3, lr=0.05, sampled=sampled, oracle=True
    )
    x_ref, v_ref = ditto_reference(problem, sampled, 3, 0.05, 0.01, 0.5, 0.03)
    assert_close(x, x_ref)
    assert set(states) == {0, 1, 2}
    for i in range(3):
        assert_close(states[i]["v"], v_ref[i])
        tested = unflatten(x_ref)
        alg.load_personalised(tested, [], states[i])
        assert_close(tested, v_ref[i])
        trains_from = unflatten(x_ref)
        alg.load_client(trains_from, [], states[i])  # the client trains the global model from x
        assert_close(trains_from, x_ref)
    # a client that never trained is evaluated with the global model
    new = unflatten(x_ref)
    alg.load_personalised(new, [], None)
    assert_close(new, x_ref)


def test_ditto_global_model_is_fedavg_and_lambda_pins_v() -> None:
    problem = Problem(clients=3)
    ditto = make("ditto", clients=3, weight_decay=0.0, lam=1.0)
    x, _, _ = run_federated(ditto, problem, rounds=2, local_steps=2, lr=0.05, oracle=True)
    avg, _, _ = run_federated(
        make("fedavg", clients=3, weight_decay=0.0), problem, rounds=2, local_steps=2, lr=0.05
    )
    assert_close(x, flatten(avg))  # the personal steps never touch the global model
    # personal_lr null: the local lr; the first personal step starts at v = x^0, where the
    # proximal term is 0 whatever lambda: v = x^0 - lr * g(x^0) (client 0, round 0)
    one = make("ditto", clients=3, weight_decay=0.0, lam=3.0)
    _, _, first = run_federated(one, problem, rounds=1, local_steps=1, lr=0.05, oracle=True)
    x0 = flatten(problem.x0())
    assert_close(first[0]["v"], x0 - 0.05 * problem.flat_grad(x0, 0))


def test_gradient_at_leaves_y_unchanged_and_counts_two_gradients() -> None:
    from fedbench.personal.steps import gradient_at

    problem = Problem(clients=1)
    y = problem.x0()
    before = flatten(y).clone()
    point = [t + 1.0 for t in y]
    g = gradient_at(y, point, StepOracle(lambda: problem.grad(y, 0)))
    assert_close(g, problem.flat_grad(flatten(point), 0))
    assert torch.equal(flatten(y), before)
    assert ALGORITHMS.get("ditto").gradients_per_step == 2
    assert ALGORITHMS.get("dp_ditto").dp_twin_of == "ditto"
