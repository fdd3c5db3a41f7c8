"""The vectorised engine equals the sequential one for every algorithm.

The logic (stacking, padding, per-client clipping, aggregation) is compared in float64 at 1e-9:
Adam-type steps m/(sqrt(v)+eps) amplify fp32 reduction-order noise, and that order changes
between torch versions and devices. One fp32 smoke test compares relative norms. BatchNorm and
client chunks are compared the same way."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from fedbench.algorithms import ALGORITHMS
from fedbench.config import parse_run_config
from fedbench.engine.loop import Engine
from fedbench.engine.run import select_engine
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.schedule import local_lr
from fedbench.engine.setup import prepare_run
from fedbench.engine.vectorized import VectorizedEngine, vectorized_unsupported
from tests.conftest import algorithm_needs
from tests.engine.nets import batchnorm_net, build_engine, with_model

TOL = 1e-9  # float64
FP32_REL = 1e-4  # relative norm of the difference in float32


def _config(algorithm: dict, **overrides: dict) -> dict:
    base = {
        "seed": 3,
        "data": {"name": "digits"},
        "partition": {"kind": "dirichlet", "alpha": 0.5, "clients": 12},
        "model": {"name": "cnn"},
        "fl": {"rounds": 2, "participation": 0.25, "local_steps": 4, "batch_size": 16},
        "algorithm": {"lr": 1.0e-2, **algorithm},
        "eval": {"every": 1},
    }
    for key, value in overrides.items():
        base[key] = {**base.get(key, {}), **value}
    return base


def _setup(data: dict, dtype: torch.dtype = torch.float64):
    """A prepared run with the model and the data in `dtype`."""
    setup = prepare_run(parse_run_config(data))
    if dtype != torch.float32:
        setup.model.to(dtype)
        d = setup.data
        setup.data = replace(d, x_train=d.x_train.to(dtype), x_test=d.x_test.to(dtype))
    return setup


def _train(
    data: dict, engine_cls: type[Engine], tmp: Path, dtype: torch.dtype = torch.float64
) -> Engine:
    setup = _setup(data, dtype)
    engine = build_engine(engine_cls, setup, RunFolder(tmp))
    for r in range(setup.cfg.fl.rounds):
        engine._round(r, local_lr(setup.cfg.algorithm, r, setup.cfg.fl.rounds))
    return engine


def _flatten(state) -> list[torch.Tensor]:
    if isinstance(state, torch.Tensor):
        return [state]
    if isinstance(state, dict):
        return [t for k in sorted(state) for t in _flatten(state[k])]
    if isinstance(state, list | tuple):
        return [t for item in state for t in _flatten(item)]
    return []


def _assert_same(data: dict, tmp_path: Path) -> None:
    seq = _train(data, Engine, tmp_path / "s")
    vec = _train(data, VectorizedEngine, tmp_path / "v")
    assert seq.x[0].dtype == vec.x[0].dtype == torch.float64
    for a, b in zip(seq.x, vec.x, strict=True):
        torch.testing.assert_close(b, a, atol=TOL, rtol=TOL)
    for a, b in zip(_flatten(seq.server), _flatten(vec.server), strict=True):
        torch.testing.assert_close(b, a, atol=TOL, rtol=TOL)
    assert sorted(seq.client_states) == sorted(vec.client_states)
    for c in seq.client_states:
        for a, b in zip(
            _flatten(seq.client_states[c]), _flatten(vec.client_states[c]), strict=True
        ):
            torch.testing.assert_close(b, a, atol=TOL, rtol=TOL)


def _supported(name: str) -> bool:
    return ALGORITHMS.get(name).supports_vectorized and not name.startswith("dp_")


def _needs(name: str) -> dict[str, dict]:
    """`algorithm_needs` as config sections (a personalised method's client test split,
    FedBN's BatchNorm model)."""
    sections: dict[str, dict] = {}
    for item in algorithm_needs(name):
        key, value = item.split("=", 1)
        section, field = key.split(".")
        sections.setdefault(section, {})[field] = float(value) if section == "partition" else value
    return sections


@pytest.mark.parametrize("name", [n for n, _ in ALGORITHMS.items() if _supported(n)])
def test_parity_every_algorithm(name: str, tmp_path: Path) -> None:
    # grad_clip 1.0 clips most steps, so per-client clipping is exercised.
    _assert_same(_config({"name": name, "grad_clip": 1.0}, **_needs(name)), tmp_path)


@pytest.mark.parametrize("chunk", [1, 2])
def test_parity_in_client_chunks(chunk: int, tmp_path: Path) -> None:
    # 3 clients per round: chunks of 1 and of 2 + 1 (an uneven last chunk).
    data = _config({"name": "scaffold", "grad_clip": 1.0}, runtime={"client_chunk": chunk})
    _assert_same(data, tmp_path)


@pytest.mark.parametrize(
    "variant",
    [
        {"v_agg": "full", "m_agg": True},
        {"v_agg": "none", "alpha": 0.0},
        {"blocks": "global", "decoupled": False},
        # Table 11's Algorithm 3 and the public script's forms (issue 12).
        {"alignment": "convex", "alpha": 0.3, "beta1": 0.0, "weight_decay": 0.0},
        {"alignment": "convex", "m_bias_correction": "global", "v_agg": "full"},
        {"m_bias_correction": "global", "eps": 1.0e-3},
        # Row-group blocks (the cnn's linear layers one block per output row; per-head blocks of
        # a transformer use the same row groups).
        {"blocks": "hessian"},
    ],
)
def test_parity_fedadamw_variants(variant: dict, tmp_path: Path) -> None:
    _assert_same(_config({"name": "fedadamw", **variant}), tmp_path)


@pytest.mark.parametrize("name", ["fedadamw", "scaffold"])
def test_parity_of_diagnostics(name: str, tmp_path: Path) -> None:
    """client_drift and v_spread (FedAdamW Figure 2) agree between the engines."""
    data = _config({"name": name}, eval={"diagnostics": True})
    found = []
    for engine_cls, sub in ((Engine, "s"), (VectorizedEngine, "v")):
        setup = _setup(data)
        engine = build_engine(engine_cls, setup, RunFolder(tmp_path / sub))
        engine._round(0, local_lr(setup.cfg.algorithm, 0, 2), diagnostics=True)
        found.append(engine.diagnostics)
    seq, vec = found
    assert seq["client_drift"] > 0
    assert vec["client_drift"] == pytest.approx(seq["client_drift"], rel=1e-9)
    assert seq["local_step_ratio"] > 0
    assert vec["local_step_ratio"] == pytest.approx(seq["local_step_ratio"], rel=1e-9)
    if name == "fedadamw":
        assert seq["v_spread"] > 0
        assert vec["v_spread"] == pytest.approx(seq["v_spread"], rel=1e-9)
    else:
        assert seq["v_spread"] is None and vec["v_spread"] is None


def test_parity_logreg_unequal_clients_full_batch(tmp_path: Path) -> None:
    # dirichlet_label gives unequal client sizes; batch_size 0 pads and masks the batches.
    data = _config(
        {"name": "local_adamw", "weighting": "samples", "grad_clip": None},
        partition={"kind": "dirichlet_label", "alpha": 0.3},
        model={"name": "logreg"},
        fl={"batch_size": 0},
    )
    _assert_same(data, tmp_path)


def _tiny_batchnorm_setup(data: dict):
    """A prepared float64 run whose model is a small conv net with BatchNorm."""
    return with_model(_setup(data), batchnorm_net(0).double())


@pytest.mark.parametrize("algorithm", [{"name": "fedavg"}, {"name": "fedadamw", "eps": 1e-3}])
def test_batchnorm_parity_with_per_client_statistics(algorithm: dict, tmp_path: Path) -> None:
    """BatchNorm inside the vectorised step: batch statistics per client, running statistics
    per client averaged at the end of the round, exactly as the sequential engine does."""
    data = _config(
        {**algorithm, "grad_clip": 1.0},
        partition={"kind": "iid"},
        runtime={"client_chunk": 2},
    )
    engines = []
    for engine_cls, sub in ((Engine, "s"), (VectorizedEngine, "v")):
        setup = _tiny_batchnorm_setup(data)
        assert vectorized_unsupported(setup) is None
        engine = build_engine(engine_cls, setup, RunFolder(tmp_path / sub))
        for r in range(setup.cfg.fl.rounds):
            engine._round(r, local_lr(setup.cfg.algorithm, r, setup.cfg.fl.rounds))
        engines.append(engine)
    seq, vec = engines
    for a, b in zip(seq.x + _flatten(seq.server), vec.x + _flatten(vec.server), strict=True):
        torch.testing.assert_close(b, a, atol=TOL, rtol=TOL)
    _, running_var, steps = seq.global_buffers
    assert float(running_var.sub(1).abs().max()) > 1e-3  # the statistics did move
    assert int(steps) == 2 * 4  # 2 rounds of 4 steps (the first client's counter)
    for a, b in zip(seq.global_buffers, vec.global_buffers, strict=True):
        torch.testing.assert_close(b, a, atol=TOL, rtol=TOL)


def test_batchnorm_clients_of_unequal_batches_train_in_groups(tmp_path: Path) -> None:
    # batch_size 0: each client's whole local set is its batch. Padding would enter the batch
    # statistics, so clients of different sizes train apart, and the engines still agree.
    data = _config(
        {"name": "fedavg", "grad_clip": 1.0},
        partition={"kind": "dirichlet_label", "alpha": 0.3},
        fl={"batch_size": 0, "local_steps": 2},
    )
    setup = _tiny_batchnorm_setup(data)
    engines = []
    for engine_cls, sub in ((Engine, "s"), (VectorizedEngine, "v")):
        engine = build_engine(engine_cls, _tiny_batchnorm_setup(data), RunFolder(tmp_path / sub))
        engine._round(0, 0.05)
        engines.append(engine)
    seq, vec = engines
    clients = setup.schedule[0]
    assert len({setup.client_sizes[c] for c in clients}) > 1
    assert vec._groups(clients) == [[c] for c in clients]
    for a, b in zip(seq.x + seq.global_buffers, vec.x + vec.global_buffers, strict=True):
        torch.testing.assert_close(b, a, atol=TOL, rtol=TOL)


def test_private_runs_fall_back_to_sequential(tmp_path: Path, capsys) -> None:
    data = _config({"name": "dp_fedavg"}, model={"name": "logreg"})
    data["privacy"] = {"noise_multiplier": 1.0, "clip": 1.0, "delta": 1.0e-5}
    data["runtime"] = {"engine": "vectorized"}
    setup = prepare_run(parse_run_config(data))
    assert "DP" in vectorized_unsupported(setup)
    assert type(select_engine(setup, RunFolder(tmp_path), None)) is Engine
    assert "sequential" in capsys.readouterr().err


def test_fp32_smoke_relative_difference(tmp_path: Path) -> None:
    """In float32 the engines agree up to reduction-order noise: ||a - b|| / ||a|| <= 1e-4."""
    data = _config({"name": "fedavg", "grad_clip": 1.0})
    seq = _train(data, Engine, tmp_path / "s", torch.float32)
    vec = _train(data, VectorizedEngine, tmp_path / "v", torch.float32)
    a = torch.cat([t.flatten() for t in seq.x])
    b = torch.cat([t.flatten() for t in vec.x])
    assert a.dtype == torch.float32
    assert float((a - b).norm() / a.norm()) <= FP32_REL
