"""mimelite: the hand rule (server momentum m frozen in every local step, c_i the gradient at x,
m <- (1 - beta) mean c_i + beta m) over rounds with partial participation."""

import pytest
import torch

from tests.algorithms.harness import Problem, assert_close, flatten, make, run_federated


def mimelite_reference(problem, rounds, K, lrs, sampled, wd, beta, eta_g=1.0):
    x = flatten(problem.x0())
    m = torch.zeros_like(x)
    for r in range(rounds):
        eta = lrs[r]
        deltas, cs = [], []
        for i in sampled[r]:
            cs.append(problem.flat_grad(x, i) + wd * x)
            y = x.clone()
            for _ in range(K):
                g = problem.flat_grad(y, i) + wd * y
                y = y - eta * ((1 - beta) * g + beta * m)
            deltas.append(y - x)
        x = x + eta_g * torch.stack(deltas).mean(0)
        m = (1 - beta) * torch.stack(cs).mean(0) + beta * m
    return x, m


def test_mimelite_three_rounds_by_hand_partial_participation() -> None:
    problem = Problem(clients=4)
    sampled = [[0, 1], [1, 3], [0, 2]]
    lrs = [0.05, 0.04, 0.05]
    alg = make("mimelite", clients=4, weight_decay=0.01, beta=0.7, server_lr=0.9)
    x, server, states = run_federated(
        alg, problem, rounds=3, local_steps=3, lr=lambda r: lrs[r], sampled=sampled
    )
    ref_x, ref_m = mimelite_reference(problem, 3, 3, lrs, sampled, 0.01, 0.7, 0.9)
    assert_close(x, ref_x)
    assert_close(server["m"], ref_m)
    assert states == {}  # no per-client state
    assert (alg.comm_up(), alg.comm_down()) == (16.0, 16.0)


def test_mimelite_with_beta_zero_is_fedavg() -> None:
    problem = Problem(clients=3)
    runs = {}
    for name, fields in (("mimelite", {"beta": 0.0}), ("fedavg", {})):
        alg = make(name, clients=3, weight_decay=0.01, **fields)
        x, _, _ = run_federated(alg, problem, rounds=2, local_steps=4, lr=0.05)
        runs[name] = flatten(x)
    assert_close(runs["mimelite"], runs["fedavg"])


def test_mimelite_full_batch_gradient_is_mime_algorithm_1() -> None:
    """`full_batch_gradient: true`: c_i = grad f_i(x) + lambda x over the client's whole data
    (the gradient oracle's `full`, taken at the first step), not the first step's gradient. The
    local steps here see a perturbed gradient (a minibatch stand-in), so the two forms differ."""
    from fedbench.algorithms.base import RoundInfo, StepOracle

    problem = Problem(clients=3)
    wd, beta, lr, K = 0.01, 0.7, 0.05, 3
    for full in (True, False):
        alg = make("mimelite", clients=3, weight_decay=wd, beta=beta, full_batch_gradient=full)
        assert alg.uses_full_gradient(alg.params) is full
        x = problem.x0()
        server = alg.init_server_state(x)
        info = RoundInfo(0, lr, K, 3, 3)
        flat_x = flatten(x)
        cs, deltas = [], []
        for i in range(3):
            local = alg.client_begin(x, server, None, info)
            y = [t.clone() for t in x]
            for k in range(1, K + 1):
                oracle = StepOracle(
                    lambda y=y, i=i: [t + 0.3 for t in problem.grad(y, i)],  # a biased minibatch
                    full=lambda y=y, i=i: problem.grad(y, i),
                )
                alg.local_step_with_oracle(y, oracle, local, k, info)
            upload, _ = alg.client_end(y, x, local, None, info)
            cs.append(flatten(upload["grad"]))
            deltas.append(flatten(upload["delta"]))
        first = [problem.flat_grad(flat_x, i) + 0.3 + wd * flat_x for i in range(3)]
        exact = [problem.flat_grad(flat_x, i) + wd * flat_x for i in range(3)]
        assert_close(torch.stack(cs), torch.stack(exact if full else first))
        # the local steps are the same in both forms (m = 0 in round 0)
        y_ref = []
        for i in range(3):
            y = flat_x.clone()
            for _ in range(K):
                y = y - lr * (1 - beta) * (problem.flat_grad(y, i) + 0.3 + wd * y)
            y_ref.append(y - flat_x)
        assert_close(torch.stack(deltas), torch.stack(y_ref))


def test_engine_full_gradient_pass_is_the_mean_gradient_over_all_samples() -> None:
    """fedbench.engine.client.full_gradient: the gradient of the mean cross-entropy over every
    sample of the client (batched), with BatchNorm's running statistics left untouched."""
    import contextlib
    from types import SimpleNamespace

    from torch import nn

    from fedbench.engine.client import LocalTraining, full_gradient

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.Linear(5, 3)).double().train()
    params = list(model.parameters())
    data = SimpleNamespace(
        x_train=torch.randn(20, 4, dtype=torch.float64), y_train=torch.randint(0, 3, (20,))
    )
    run = LocalTraining(
        model=model, forward=model, params=params, algorithm=None, data=data,  # type: ignore[arg-type]
        batch_size=4, seed=0, grad_clip=None,
    )  # fmt: skip
    samples = torch.tensor([0, 3, 5, 6, 9, 12, 13, 17])
    stats = [b.clone() for b in model.buffers()]
    g = full_gradient(run, samples, contextlib.nullcontext())
    for b, before in zip(model.buffers(), stats, strict=True):
        assert torch.equal(b, before)
    expected = [torch.zeros_like(p) for p in params]
    for chunk in samples.split(4):  # BatchNorm normalises per batch: the pass's batches
        loss = torch.nn.functional.cross_entropy(
            model(data.x_train[chunk]), data.y_train[chunk], reduction="sum"
        )
        for e, gi in zip(expected, torch.autograd.grad(loss, params), strict=True):
            e += gi / 8
    for a, b in zip(g, expected, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)


def test_engine_mimelite_full_batch_runs_and_refuses_sample_level_dp(run_cli, tmp_path) -> None:
    from fedbench.engine import train
    from tests.conftest import read_metrics
    from tests.engine.test_engine import tiny_config

    cheap = train(tiny_config("algorithm.name=mimelite"), tmp_path / "a")
    full = train(
        tiny_config("algorithm.name=mimelite", "algorithm.full_batch_gradient=true"), tmp_path / "b"
    )
    assert full.status == "completed" and full.run_dir != cheap.run_dir
    assert (
        read_metrics(full.run_dir)[-1]["train_loss"]
        != read_metrics(cheap.run_dir)[-1]["train_loss"]
    )
    code, _, err = run_cli(
        "train", "--set", "model.name=logreg", "--set", "algorithm.name=dp_mimelite",
        "--set", "algorithm.full_batch_gradient=true", "--set", "privacy.noise_multiplier=1",
    )  # fmt: skip
    assert code == 2 and "set algorithm.full_batch_gradient false" in err
    assert len(err.strip().splitlines()) == 1


def test_the_full_data_pass_is_refused_with_sample_level_dp() -> None:
    """MimeLite is a `FullGradientRule` (its hook is off the Algorithm base class): the pass is
    not privatised, so sample-level DP refuses it, and without it the same run is taken."""
    from fedbench.algorithms import ALGORITHMS
    from fedbench.algorithms.full_gradient import FullGradientRule, uses_full_gradient
    from fedbench.config import load_run_config
    from fedbench.engine.setup import prepare_run
    from fedbench.errors import FedbenchError

    cls = ALGORITHMS.get("dp_mimelite")
    assert issubclass(cls, FullGradientRule)
    assert uses_full_gradient(cls, cls.Params(full_batch_gradient=True))
    assert not uses_full_gradient(ALGORITHMS.get("fedavg"), cls.Params(full_batch_gradient=True))
    items = ["data.name=digits", "runtime.device=cpu", "partition.clients=4", "fl.rounds=1"]
    items += ["algorithm.name=dp_mimelite", "privacy.noise_multiplier=1.0"]
    with pytest.raises(FedbenchError, match=r"full-data gradient pass .* not privatised"):
        prepare_run(load_run_config(None, [*items, "algorithm.full_batch_gradient=true"]))
    prepare_run(load_run_config(None, items))
