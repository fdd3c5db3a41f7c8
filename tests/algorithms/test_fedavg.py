"""FedAvg: y <- y - eta*(g + lambda*y); x <- x + eta_g * mean(Delta_i), computed by hand."""

import torch

from tests.algorithms.helpers import assert_close, build, grad, initial_x, make_clients, simulate


def test_fedavg_two_rounds_by_hand():
    clients, x0 = make_clients(), initial_x()
    lrs, lam, eta_g, K = [0.1, 0.05], 0.01, 0.7, 2
    algo = build("fedavg", weight_decay=lam, server_lr=eta_g)
    got = simulate(algo, x0, clients, rounds=2, local_steps=K, lrs=lrs)

    x = [t.clone() for t in x0]
    for lr in lrs:
        deltas = []
        for data in clients:
            y = [t.clone() for t in x]
            for _ in range(K):
                g = grad(y, data)
                y = [yi - lr * (gi + lam * yi) for yi, gi in zip(y, g)]
            deltas.append([yi - xi for yi, xi in zip(y, x)])
        x = [xi + eta_g * sum(d[j] for d in deltas) / len(deltas) for j, xi in enumerate(x)]
    assert_close(got, x)


def test_fedavg_communication():
    algo = build("fedavg")
    assert algo.spec.d == 8
    assert (algo.comm_up(), algo.comm_down()) == (8.0, 8.0)


def test_fedavg_single_client_one_step_is_sgd():
    clients, x0 = make_clients(n_clients=1), initial_x()
    algo = build("fedavg", weight_decay=0.0)
    got = simulate(algo, x0, clients, rounds=1, local_steps=1, lrs=[0.2])
    g = grad(x0, clients[0])
    assert_close(got, [xi - 0.2 * gi for xi, gi in zip(x0, g)])
    assert not torch.allclose(got[0], x0[0])
