"""The split-model methods on the engines: the vectorised executor equals the sequential one
(float64, 1e-9: x, the server state and every client's kept part), FedBN's BatchNorm statistics
stay on the clients, and a model whose head is all of it is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedbench.config import parse_run_config
from fedbench.engine.loop import Engine
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.schedule import local_lr
from fedbench.engine.setup import prepare_run
from fedbench.engine.vectorized import VectorizedEngine
from fedbench.errors import FedbenchError
from fedbench.personal.store import state_bytes
from tests.engine.nets import build_engine
from tests.engine.test_vectorized import _assert_same, _config, _setup

SPLIT = ["fedper", "fedrep", "lg_fedavg", "fedbabu", "fedbn"]


def _split_config(name: str, **algorithm: object) -> dict:
    return _config(
        {"name": name, "grad_clip": 1.0, **algorithm},
        model={"name": "cnn_bn" if name == "fedbn" else "cnn"},
        partition={"client_test_fraction": 0.2},
        fl={"rounds": 3, "participation": 0.5},
    )


@pytest.mark.parametrize("name", SPLIT)
def test_vectorized_equals_sequential(name: str, tmp_path: Path) -> None:
    # 3 rounds of half the 12 clients: clients come back with their kept part
    _assert_same(_split_config(name), tmp_path)


def test_vectorized_fedrep_body_first(tmp_path: Path) -> None:
    _assert_same(
        _split_config("fedrep", order="body_first", head_epochs=1, body_epochs=1), tmp_path
    )


def _trained(name: str, engine_cls: type[Engine], tmp: Path) -> Engine:
    setup = _setup(_split_config(name))
    engine = build_engine(engine_cls, setup, RunFolder(tmp))
    for r in range(setup.cfg.fl.rounds):
        engine._round(r, local_lr(setup.cfg.algorithm, r, setup.cfg.fl.rounds))
    return engine


@pytest.mark.parametrize("engine_cls", [Engine, VectorizedEngine])
def test_fedbn_keeps_batchnorm_on_the_clients(engine_cls: type[Engine], tmp_path: Path) -> None:
    engine = _trained("fedbn", engine_cls, tmp_path)
    spec = engine.setup.algorithm.spec
    # cnn_bn: three BatchNorm layers, each a weight and a bias, and a running mean, variance
    # and batch count
    assert len(spec.batchnorm_params) == 6 and len(spec.batchnorm_buffers) == 9
    fresh = prepare_run(parse_run_config(_split_config("fedbn"))).model.double()
    initial = [b for n, b in fresh.state_dict().items() if "running" in n or "batches" in n]
    # the server's statistics never change (never averaged), nor its BatchNorm affine part
    for j, value in zip(spec.batchnorm_buffers, initial, strict=True):
        assert torch.equal(engine.global_buffers[j], value)
    names = spec.names
    init_params = dict(fresh.named_parameters())
    for j, name in enumerate(names):
        if name in spec.batchnorm_params:
            assert torch.equal(engine.x[j], init_params[name])
    # every client that trained keeps statistics of its own: they moved, and differ by client
    states = dict(engine.client_states)
    assert len(states) >= 2
    means = [s["batchnorm_statistics"][0] for s in states.values()]  # the first layer's mean
    assert all(float(m.abs().max()) > 0 for m in means)
    assert not torch.equal(means[0], means[1])
    counts = {int(s["batchnorm_statistics"][2]) for s in states.values()}
    assert counts <= {4, 8, 12}  # K = 4 steps per visit, 1 to 3 visits
    # a stored state: 448 BatchNorm weights and biases, as many running means and variances
    # (float64 here) and 3 int64 counts; the plan's fp32 estimate counts a count as 2 floats
    stored = next(iter(states.values()))
    assert state_bytes(stored) == 8 * (448 + 448) + 3 * 8
    assert engine.setup.algorithm.stored_floats() == 448 + 448 + 3 * 2


@pytest.mark.parametrize("name", ["fedper", "fedrep", "fedbabu", "lg_fedavg"])
def test_a_model_that_is_all_head_is_refused(name: str) -> None:
    cfg = _split_config(name)
    cfg["model"] = {"name": "logreg"}
    with pytest.raises(FedbenchError, match="whole model"):
        prepare_run(parse_run_config(cfg))
