"""Rules with several gradients per step (FedSAM's ascent point, FAFED's two points) on the
stacked executor: it hands `local_step_with_oracle` a gradient oracle over the stacked rows
(fedbench.engine.stacked.stacked_step), whose reductions are per client (`GradientOracle.norm`);
and MOON, whose oracle differentiates the objective with the representation term, each row
against its own anchors.

Compared in float64 at 1e-12: a run on `runtime.engine: vectorized` (and seeds trained together)
writes what the same run writes on the sequential engine: metrics.jsonl rows (elapsed_s aside)
and the final weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fedbench.algorithms import ALGORITHMS
from fedbench.algorithms.base import ParamSpec, RoundInfo, StepOracle
from fedbench.config import RunConfig, load_run_config
from fedbench.engine import stacked
from fedbench.engine.client_state import stack_states
from fedbench.engine.run import RunResult
from fedbench.engine.run_seeds import train_together
from fedbench.engine.setup import RunSetup
from tests.engine.nets import batchnorm_net, prepare64, with_model
from tests.engine.test_seeds import _difference

pytestmark = pytest.mark.engine

TOL = 1e-12
F64 = torch.float64


def _cfg(seed: int, algorithm: str, engine: str, *extra: str) -> RunConfig:
    return load_run_config(
        None,
        [
            f"seed={seed}",
            f"algorithm.name={algorithm}",
            "algorithm.lr=0.02",
            "algorithm.grad_clip=1.0",  # clips most steps: per-row clipping is exercised
            "algorithm.weight_decay=0.01",
            "model.name=cnn",
            "partition.clients=8",
            "partition.kind=dirichlet",
            "partition.alpha=0.5",
            "fl.participation=0.5",
            "fl.rounds=3",  # FAFED: round 0 is its initial exchange, then two STORM rounds
            "fl.local_steps=3",
            "fl.batch_size=16",
            "eval.every=1",
            "eval.train_subset=200",
            "runtime.checkpoint_every=0",
            "runtime.device=cpu",
            f"runtime.engine={engine}",
            *extra,
        ],
    )


def _batchnorm64(cfg: RunConfig) -> RunSetup:
    return with_model(prepare64(cfg), batchnorm_net(cfg.seed).double())


def _trained(cfgs: list[RunConfig], out: Path, prepare=prepare64) -> list[Path]:
    results = train_together(cfgs, out, save_model=True, prepare=prepare)
    assert all(isinstance(r, RunResult) and r.status == "completed" for r in results), results
    return [r.run_dir for r in results]  # type: ignore[union-attr]


def _engine(run_dir: Path) -> str:
    return json.loads((run_dir / "summary.json").read_text())["engine"]


@pytest.mark.parametrize(
    ("algorithm", "extra", "prepare"),
    [
        ("fedsam", (), prepare64),
        ("fafed", (), prepare64),
        # Each gradient's forward updates the BatchNorm statistics, twice per step on both.
        ("fedsam", ("runtime.client_chunk=3",), _batchnorm64),
        ("fafed", ("runtime.client_chunk=3",), _batchnorm64),
        # MOON: the representation term in the stacked objective, anchors per row.
        ("moon", (), prepare64),
        # Unequal clients, each batch its whole local set: trained in groups of one width (a
        # padded sample would enter the contrastive term's batch mean).
        (
            "moon",
            ("fl.batch_size=0", "partition.kind=dirichlet_label", "fl.rounds=2"),
            prepare64,
        ),
        # MimeLite's full local-data gradient at x before the steps, in batches of equal
        # width stacked (clients of unequal sizes end on batches of their own widths).
        (
            "mimelite",
            ("algorithm.full_batch_gradient=true", "partition.kind=dirichlet_label"),
            prepare64,
        ),
        # ... with BatchNorm: each batch's own statistics, the buffers left as they were.
        ("mimelite", ("algorithm.full_batch_gradient=true",), _batchnorm64),
        # ... with fl.batch_size 0 (every batch the client's whole set): one full pass each.
        (
            "mimelite",
            ("algorithm.full_batch_gradient=true", "fl.batch_size=0", "fl.rounds=2"),
            prepare64,
        ),
    ],
    ids=[
        "fedsam", "fafed", "fedsam-bn-chunks", "fafed-bn-chunks", "moon", "moon-widths",
        "mimelite-full", "mimelite-full-bn", "mimelite-full-whole-batches",
    ],
)  # fmt: skip
def test_oracle_rules_stacked_equal_sequential(
    algorithm: str, extra: tuple[str, ...], prepare, tmp_path: Path
) -> None:
    (seq,) = _trained([_cfg(1, algorithm, "sequential", *extra)], tmp_path / "s", prepare)
    (vec,) = _trained([_cfg(1, algorithm, "vectorized", *extra)], tmp_path / "v", prepare)
    assert (_engine(seq), _engine(vec)) == ("sequential", "vectorized")  # no silent fallback
    assert _difference(vec, seq) <= TOL


@pytest.mark.parametrize(
    "items",
    [
        ("algorithm.name=fedsam",),
        ("algorithm.name=fafed",),
        ("algorithm.name=moon",),
        ("algorithm.name=mimelite", "algorithm.full_batch_gradient=true"),
    ],
    ids=["fedsam", "fafed", "moon", "mimelite-full"],
)
def test_seeds_together_equal_each_seed_sequential(items: tuple[str, ...], tmp_path: Path) -> None:
    """Two seeds stacked (seed x client rows, one oracle over all of them) against each seed
    trained alone on the sequential engine."""
    name, extra = items[0].removeprefix("algorithm.name="), items[1:]
    together = _trained(
        [_cfg(s, name, "vectorized", "runtime.seeds_together=2", *extra) for s in (1, 2)],
        tmp_path / "t",
    )
    alone = [_trained([_cfg(s, name, "sequential", *extra)], tmp_path / "a")[0] for s in (1, 2)]
    for a, b in zip(together, alone, strict=True):
        assert _engine(a) == "vectorized"
        assert _difference(a, b) <= TOL
    assert _difference(together[0], together[1]) > 1e-3  # the seeds did differ


def test_runs_stepped_apart_take_their_own_rows(tmp_path: Path, monkeypatch) -> None:
    """Seeds whose rounds disagree (one resumed further) step apart, each on its rows of the
    stack: its weights, buffers and batch as row views, its own oracle. Forced here for two
    seeds at the same round (their groups kept apart), with BatchNorm statistics updated in
    place through the views."""
    monkeypatch.setattr(stacked, "_merged", lambda groups: groups)
    cfgs = [_cfg(s, "fedsam", "vectorized", "runtime.seeds_together=2") for s in (1, 2)]
    together = _trained(cfgs, tmp_path / "t", _batchnorm64)
    alone = [
        _trained([_cfg(s, "fedsam", "sequential")], tmp_path / "a", _batchnorm64)[0] for s in (1, 2)
    ]
    for a, b in zip(together, alone, strict=True):
        assert _difference(a, b) <= TOL


def _stack(rows: list[list[torch.Tensor]]) -> list[torch.Tensor]:
    return [torch.stack(ts) for ts in zip(*rows, strict=True)]


def _client(seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=generator, dtype=F64) for s in ((3, 4), (5,), ())]


def test_the_oracles_norm_is_per_row_on_a_stack() -> None:
    a, b = _client(0), _client(1)
    one = StepOracle(lambda: a)
    norms = [one.norm(a), one.norm(b)]
    assert norms[0].shape == () and float(norms[0]) != pytest.approx(float(norms[1]))
    expected = torch.cat([t.flatten() for t in a]).norm()
    torch.testing.assert_close(norms[0], expected, atol=0, rtol=1e-15)
    rows = StepOracle(lambda: _stack([a, b]), rows=2)
    found = rows.norm(_stack([a, b]))
    assert found.shape == (2,)
    torch.testing.assert_close(found, torch.stack(norms), atol=0, rtol=1e-15)
    # scale: each row times its own factor, as each client alone
    factor = 1.0 / (found + 1e-12)
    scaled = rows.scale(_stack([a, b]), factor)
    alone = [one.scale(a, factor[0]), one.scale(b, factor[1])]
    for got, want in zip(scaled, _stack(alone), strict=True):
        torch.testing.assert_close(got, want, atol=0, rtol=1e-15)


def test_the_one_client_oracle_calls_its_function() -> None:
    calls: list[int] = []

    def gradient() -> list[torch.Tensor]:
        calls.append(1)
        return [torch.ones(2, dtype=F64)]

    oracle = StepOracle(gradient)
    assert oracle.rows is None and oracle.compute is gradient
    assert torch.equal(oracle()[0], torch.ones(2, dtype=F64)) and calls == [1]


def _quadratic(y: list[torch.Tensor], centre: list[torch.Tensor]) -> list[torch.Tensor]:
    """A client's gradient field, elementwise and non-linear: g(y) = (y - centre) * (1 + y^2)."""
    return [(t - c) * (1.0 + t * t) for t, c in zip(y, centre, strict=True)]


@pytest.mark.parametrize("name", ["fedsam", "fafed"])
def test_a_two_gradient_step_on_a_stack_is_each_client_alone(name: str) -> None:
    """The rule's step on a 2-row stack with the stacked oracle equals its step on each row
    with a one-client oracle (||g1|| per row: a norm over the whole stack would differ)."""
    spec = ParamSpec(["a", "b", "c"], [torch.Size(s) for s in ((3, 4), (5,), ())], {})
    cls = ALGORITHMS.get(name)
    alg = cls(cls.Params(rho=0.5) if name == "fedsam" else cls.Params(), spec, num_clients=2)
    x, centres = _client(5), [_client(6), _client(7)]
    info = RoundInfo(1, 0.1, 2, 2, 2)
    server = {"m": _client(8), "v": [t.abs() for t in _client(9)], "x_prev": _client(10)}
    singles, locals_ = [], []
    for centre in centres:
        y = [t.clone() for t in x]
        local = alg.client_begin(x, server, None, info)
        for k in (1, 2):
            oracle = StepOracle(lambda y=y, c=centre: _quadratic(y, c))
            alg.local_step_with_oracle(y, oracle, local, k, info)
        singles.append(y)
        locals_.append(local)
    y = _stack([[t.clone() for t in x]] * 2)
    local = stack_states([alg.client_begin(x, server, None, info) for _ in centres])
    centre = _stack(centres)
    for k in (1, 2):
        oracle = StepOracle(lambda: _quadratic(y, centre), rows=2)
        alg.local_step_with_oracle(y, oracle, local, k, info)
    for got, want in zip(y, _stack(singles), strict=True):
        torch.testing.assert_close(got, want, atol=1e-15, rtol=1e-14)
    assert float((singles[0][0] - singles[1][0]).abs().max()) > 1e-3  # the rows differ
