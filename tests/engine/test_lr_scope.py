"""`algorithm.lr_schedule_scope`: the schedule over the rounds (eta_r) or over the K local steps
of every round (FedAdamW paper, Appendix C: "cosine decay is applied to local learning rates over
the 50 local steps per round"), checked against hand computations in float64."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fedbench.algorithms.base import RoundInfo
from fedbench.config import parse_run_config
from fedbench.engine.loop import Engine
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.schedule import local_lr, round_info
from fedbench.engine.setup import prepare_run
from fedbench.engine.vectorized import VectorizedEngine
from tests.algorithms.harness import make
from tests.engine.nets import build_engine

#: cosine over K = 4 steps: 0.5 * (1 + cos(pi * (k - 1) / 4)), k = 1..4
COS4 = [1.0, 0.5 * (1 + math.sqrt(0.5)), 0.5, 0.5 * (1 - math.sqrt(0.5))]


def _params(**fields):
    cfg = parse_run_config({"algorithm": {"name": "fedavg", "lr": 0.1, **fields}})
    return cfg.algorithm


def test_round_scope_is_unchanged_and_local_scope_restarts_every_round():
    # round scope: eta_r = 0.1 * 0.5 * (1 + cos(pi r / 10)); constant within the round
    rnd = _params(lr_schedule="cosine")
    assert local_lr(rnd, 5, 10) == pytest.approx(0.05, abs=1e-15)
    info = round_info(rnd, 5, 0.05, 4, 10, 2)
    assert [info.at_step(k).lr for k in range(1, 5)] == [0.05] * 4
    assert info.lr_sum == pytest.approx(0.2, abs=1e-15)
    # local scope: every round starts at lr and decays over its 4 steps
    loc = _params(lr_schedule="cosine", lr_schedule_scope="local")
    assert [local_lr(loc, r, 10) for r in (0, 5, 9)] == [0.1, 0.1, 0.1]
    info = round_info(loc, 5, 0.1, 4, 10, 2)
    steps = [info.at_step(k).lr for k in range(1, 5)]
    assert steps == pytest.approx([0.1 * c for c in COS4], abs=1e-15)
    # sum = 0.1 * (1 + 0.8536 + 0.5 + 0.1464) = 0.25, also as seen from inside a step
    assert info.lr_sum == pytest.approx(0.25, abs=1e-15)
    assert info.at_step(3).lr_sum == pytest.approx(0.25, abs=1e-15)
    # exp within the round: lr * gamma^(k-1)
    exp = round_info(
        _params(lr_schedule="exp", lr_decay=0.5, lr_schedule_scope="local"), 0, 0.1, 3, 1, 1
    )
    assert [exp.at_step(k).lr for k in (1, 2, 3)] == pytest.approx([0.1, 0.05, 0.025], abs=1e-15)
    assert exp.lr_sum == pytest.approx(0.175, abs=1e-15)
    # constant: both scopes give lr at every step
    const = round_info(_params(lr_schedule="constant", lr_schedule_scope="local"), 3, 0.1, 4, 1, 1)
    assert const.at_step(4).lr == 0.1 and const.lr_sum == pytest.approx(0.4, abs=1e-15)


def test_run_id_keeps_round_scope_out_of_the_hash():
    base = {"algorithm": {"name": "fedavg"}}
    default = parse_run_config(base).run_id()
    explicit = parse_run_config({"algorithm": {"name": "fedavg", "lr_schedule_scope": "round"}})
    local = parse_run_config({"algorithm": {"name": "fedavg", "lr_schedule_scope": "local"}})
    assert explicit.run_id() == default and local.run_id() != default


def _config(algorithm: str) -> dict:
    return {
        "seed": 1,
        "data": {"name": "digits"},
        "partition": {"kind": "dirichlet", "alpha": 0.5, "clients": 6},
        "model": {"name": "logreg"},
        "fl": {"rounds": 2, "participation": 0.5, "local_steps": 4, "batch_size": 0},
        "algorithm": {
            "name": algorithm,
            "lr": 0.5,
            "lr_schedule": "cosine",
            "lr_schedule_scope": "local",
            "weight_decay": 0.0,
            "grad_clip": None,
        },
        "eval": {"every": 1},
    }


def _setup64(data: dict):
    setup = prepare_run(parse_run_config(data))
    setup.model.to(torch.float64)
    d = setup.data
    setup.data = replace(d, x_train=d.x_train.to(torch.float64), x_test=d.x_test.to(torch.float64))
    return setup


@pytest.mark.parametrize("engine_cls", [Engine, VectorizedEngine], ids=["sequential", "vectorized"])
def test_fedavg_local_cosine_matches_hand_loop(tmp_path: Path, engine_cls: type[Engine]):
    """FedAvg, full-batch, no decay: y_k = y_{k-1} - 0.5 * COS4[k-1] * grad(y_{k-1}); x = mean y."""
    data = _config("fedavg")
    setup = _setup64(data)
    x = [p.detach().clone() for p in setup.model.parameters()]
    engine = build_engine(engine_cls, setup, RunFolder(tmp_path))
    for r in range(2):
        engine._round(r, local_lr(setup.cfg.algorithm, r, 2))
    got = [t.detach() for t in engine.x]

    model = _setup64(data).model
    for r in range(2):
        ends = []
        for c in setup.schedule[r]:
            with torch.no_grad():
                for p, t in zip(model.parameters(), x, strict=True):
                    p.copy_(t)
            idx = setup.clients[c]
            for k in range(4):
                loss = torch.nn.functional.cross_entropy(
                    model(setup.data.x_train[idx]), setup.data.y_train[idx]
                )
                grads = torch.autograd.grad(loss, list(model.parameters()))
                with torch.no_grad():
                    for p, g in zip(model.parameters(), grads, strict=True):
                        p.sub_(0.5 * COS4[k] * g)
            ends.append([p.detach().clone() for p in model.parameters()])
        x = [sum(e[i] for e in ends) / len(ends) for i in range(len(x))]
    for a, b in zip(got, x, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_scaffold_control_variate_divides_by_the_summed_step_sizes():
    """SCAFFOLD's c_i+ = c_i - c + (x - y) / sum_k eta_k (Karimireddy et al., option II), with
    the local cosine: sum = 0.25 for lr 0.1, K 4 (not K * lr = 0.4)."""
    alg = make("scaffold", clients=1, lr=0.1)
    info = RoundInfo(0, 0.1, 4, 1, 1, step_schedule="cosine")
    x = [torch.zeros(2, dtype=torch.float64)]
    y = [torch.tensor([-0.5, 1.0], dtype=torch.float64)]
    local = {
        "c_i": [torch.zeros(2, dtype=torch.float64)],
        "correction": [torch.zeros(2, dtype=torch.float64)],
    }
    upload, state = alg.client_end(y, x, local, None, info)
    torch.testing.assert_close(upload["delta_c"][0], torch.tensor([2.0, -4.0], dtype=torch.float64))
    torch.testing.assert_close(state["c"][0], torch.tensor([2.0, -4.0], dtype=torch.float64))
