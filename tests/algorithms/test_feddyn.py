"""feddyn: the hand rule (dynamic regulariser, grad_i state, h over all N clients) over rounds
with partial participation, and the fixed point: the global optimum despite heterogeneity."""

import torch

from tests.algorithms.harness import Problem, assert_close, flatten, make, run_federated


def feddyn_reference(problem, rounds, K, lrs, sampled, wd, alpha, eta_g=1.0):
    x = flatten(problem.x0())
    h = torch.zeros_like(x)
    grads = {}
    for r in range(rounds):
        eta = lrs[r]
        deltas = []
        for i in sampled[r]:
            gi = grads.get(i, torch.zeros_like(x))
            y = x.clone()
            for _ in range(K):
                y = y - eta * (problem.flat_grad(y, i) - gi + alpha * (y - x) + wd * y)
            grads[i] = gi - alpha * (y - x)
            deltas.append(y - x)
        h = h - alpha * torch.stack(deltas).sum(0) / problem.N
        x = x + eta_g * torch.stack(deltas).mean(0) - h / alpha
    return x, h, grads


def test_feddyn_three_rounds_by_hand_partial_participation() -> None:
    problem = Problem(clients=4)
    sampled = [[0, 1], [1, 3], [0, 2]]
    lrs = [0.05, 0.04, 0.05]
    alg = make("feddyn", clients=4, weight_decay=0.01, alpha=0.3, server_lr=0.9)
    x, server, states = run_federated(
        alg, problem, rounds=3, local_steps=3, lr=lambda r: lrs[r], sampled=sampled
    )
    ref_x, ref_h, ref_grads = feddyn_reference(problem, 3, 3, lrs, sampled, 0.01, 0.3, 0.9)
    assert_close(x, ref_x)
    assert_close(server["h"], ref_h)
    assert sorted(states) == [0, 1, 2, 3]
    for i, state in states.items():
        assert_close(state["grad"], ref_grads[i])
    assert (alg.comm_up(), alg.comm_down()) == (8.0, 8.0)


def test_feddyn_reaches_the_global_optimum_where_fedavg_is_biased() -> None:
    problem = Problem(clients=4, n=8, shift=2.0)
    optimum = problem.optimum()
    gaps = {}
    for name, fields in (("feddyn", {"alpha": 0.5}), ("fedavg", {})):
        alg = make(name, clients=4, weight_decay=0.0, **fields)
        x, _, _ = run_federated(alg, problem, rounds=200, local_steps=10, lr=0.05)
        gaps[name] = float((flatten(x) - optimum).norm())
    assert gaps["feddyn"] < 1e-6
    assert gaps["fedavg"] > 1e-3


def test_feddyn_refuses_sample_weighting(run_cli) -> None:
    """Algorithm 1 averages uniformly: h <- h - alpha (1/N) sum_{i in S} (y_i - x). A
    sample-weighted mean there broke the invariant h = (1/N) sum_i grad_i (by 1.6e-2 in the
    issue's check), so the combination is refused with one line (exit 2), dp twin included."""
    import pytest
    from pydantic import ValidationError

    from fedbench.algorithms.params import algorithm_params

    for name in ("feddyn", "dp_feddyn"):
        with pytest.raises(ValidationError, match="use weighting uniform"):
            algorithm_params({"name": name, "weighting": "samples"})
    code, _, err = run_cli(
        "train", "--set", "model.name=logreg", "--set", "algorithm.name=feddyn",
        "--set", "algorithm.weighting=samples",
    )  # fmt: skip
    assert code == 2 and "use weighting uniform" in err and len(err.strip().splitlines()) == 1


def test_feddyn_server_state_is_the_mean_of_all_clients_gradients() -> None:
    """The invariant of Algorithm 1 with partial participation: h = (1/N) sum_i grad_i over
    all N clients (unsampled ones keep their last grad_i)."""
    problem = Problem(clients=4)
    alg = make("feddyn", clients=4, weight_decay=0.0)
    _, server, states = run_federated(
        alg, problem, rounds=3, local_steps=3, lr=0.05, sampled=[[0, 1], [1, 2], [3, 0]]
    )
    grads = torch.stack([flatten(states[i]["grad"]) for i in range(4)])
    assert_close(server["h"], grads.mean(0))
