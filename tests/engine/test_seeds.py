"""Seeds trained together (`runtime.seeds_together`) write what separate vectorised runs write.

Every comparison is in float64 (model and data in double), at 1e-12: metrics.jsonl rows (but for
elapsed_s) and the final weights of each seed's run folder against that seed trained alone on
the vectorised engine; with BatchNorm buffers and without; through skip, resume, divergence and
the runs that cannot stack."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from fedbench.algorithms import ALGORITHMS
from fedbench.config import RunConfig, load_run_config
from fedbench.engine.loop import Engine
from fedbench.engine.plan import seeds_group_size
from fedbench.engine.run import RunResult
from fedbench.engine.run_folder import RunBusyError, RunFolder
from fedbench.engine.run_seeds import train_together
from fedbench.engine.seeds import SeedsEngine, stack_problem
from fedbench.engine.setup import RunSetup, prepare_run
from fedbench.engine.vectorized import VectorizedEngine
from fedbench.errors import FedbenchError
from tests.conftest import algorithm_needs, read_metrics
from tests.engine.nets import batchnorm_net, prepare64, with_model

TOL = 1e-12
SEEDS = (1, 2, 3)


class Killed(BaseException):
    """Stands for a kill: not an Exception, so no run is recorded as failed."""


def _cfg(seed: int, algorithm: str = "fedavg", *extra: str) -> RunConfig:
    return load_run_config(
        None,
        [
            f"seed={seed}",
            f"algorithm.name={algorithm}",
            "algorithm.lr=0.02",
            "algorithm.grad_clip=1.0",
            "model.name=cnn",
            "partition.clients=8",
            "partition.kind=iid",
            "fl.participation=0.5",
            "fl.rounds=4",
            "fl.local_steps=3",
            "fl.batch_size=16",
            "eval.every=1",
            "eval.train_subset=200",
            "runtime.checkpoint_every=2",
            "runtime.device=cpu",
            "runtime.engine=vectorized",
            *extra,
        ],
    )


def prepare64_batchnorm(cfg: RunConfig) -> RunSetup:
    """A float64 setup whose model is a small conv net with BatchNorm, initialised by the seed."""
    return with_model(prepare64(cfg), batchnorm_net(cfg.seed).double())


def _separately(cfgs: list[RunConfig], out: Path, prepare=prepare64) -> list[Path]:
    """Each run trained alone (a group of one trains on its own engine)."""
    folders = []
    for cfg in cfgs:
        (result,) = train_together([cfg], out, save_model=True, prepare=prepare)
        assert isinstance(result, RunResult), result
        folders.append(result.run_dir)
    return folders


def _difference(a: Path, b: Path) -> float:
    """The largest relative difference between two run folders' metrics rows (elapsed_s aside)
    and final weights; inf when they differ in shape."""
    rows_a, rows_b = read_metrics(a), read_metrics(b)
    if len(rows_a) != len(rows_b):
        return math.inf
    worst = 0.0
    for ra, rb in zip(rows_a, rows_b, strict=True):
        if ra.keys() != rb.keys():
            return math.inf
        for key in ra:
            if key == "elapsed_s" or ra[key] is None:
                continue
            worst = max(worst, abs(ra[key] - rb[key]) / max(1.0, abs(ra[key])))
    wa = torch.load(a / "model.pt", weights_only=True)
    wb = torch.load(b / "model.pt", weights_only=True)
    for key, ta in wa.items():
        diff = (ta.double() - wb[key].double()).abs().max()
        worst = max(worst, float(diff) / max(1.0, float(ta.double().abs().max())))
    return worst


def _assert_same_as_separate(together: list[Path], alone: list[Path]) -> None:
    for a, b in zip(together, alone, strict=True):
        assert a.name == b.name
        assert _difference(a, b) <= TOL


@pytest.mark.parametrize("algorithm", ["fedavg", "fedadamw"])
@pytest.mark.parametrize("prepare", [prepare64, prepare64_batchnorm], ids=["cnn", "batchnorm"])
def test_seeds_together_write_what_separate_runs_write(
    algorithm: str, prepare, tmp_path: Path
) -> None:
    cfgs = [_cfg(seed, algorithm) for seed in SEEDS]
    results = train_together(cfgs, tmp_path / "together", save_model=True, prepare=prepare)
    assert [r.status for r in results] == ["completed"] * 3  # type: ignore[union-attr]
    together = [r.run_dir for r in results]  # type: ignore[union-attr]
    alone = _separately(cfgs, tmp_path / "alone", prepare)
    _assert_same_as_separate(together, alone)
    # The seeds did differ: different initialisations and client samples.
    finals = {read_metrics(path)[-1]["test_loss"] for path in together}
    assert len(finals) == 3
    assert all((path / "summary.json").is_file() for path in together)
    assert not any((path / "checkpoint.pt").exists() for path in together)


@pytest.mark.parametrize(
    ("prepare", "extra"),
    [
        (prepare64, ("algorithm.name=fedadamw", "eval.diagnostics=true")),
        (prepare64, ("runtime.client_chunk=2", "partition.kind=dirichlet_label")),
        # Unequal clients with their whole local set as the batch: BatchNorm trains each batch
        # width apart, and each seed meets its widths in its own order.
        (
            prepare64_batchnorm,
            ("partition.kind=dirichlet_label", "fl.batch_size=0", "algorithm.grad_clip=null"),
        ),
    ],
    ids=["diagnostics", "chunks", "batchnorm-widths"],
)
def test_seeds_together_in_chunks_groups_and_diagnostics(
    prepare, extra: tuple[str, ...], tmp_path: Path
) -> None:
    cfgs = [_cfg(seed, "fedavg", *extra) for seed in SEEDS]
    results = train_together(cfgs, tmp_path / "together", save_model=True, prepare=prepare)
    assert [r.status for r in results] == ["completed"] * 3  # type: ignore[union-attr]
    alone = _separately(cfgs, tmp_path / "alone", prepare)
    _assert_same_as_separate([r.run_dir for r in results], alone)  # type: ignore[union-attr]


def _vectorizable(name: str) -> bool:
    return ALGORITHMS.get(name).supports_vectorized and not name.startswith("dp_")


@pytest.mark.parametrize("name", [n for n, _ in ALGORITHMS.items() if _vectorizable(n)])
def test_every_vectorised_algorithm_stacks_its_seeds_exactly(name: str, tmp_path: Path) -> None:
    """The seeds' local rule runs once over all their rows (their rounds agree): exact for every
    algorithm the vectorised engine takes, as each row is computed as in its run alone."""
    cfgs = [_cfg(seed, name, "fl.rounds=2", *algorithm_needs(name)) for seed in SEEDS[:2]]
    results = train_together(cfgs, tmp_path / "together", save_model=True, prepare=prepare64)
    assert [r.status for r in results] == ["completed"] * 2  # type: ignore[union-attr]
    alone = _separately(cfgs, tmp_path / "alone")
    _assert_same_as_separate([r.run_dir for r in results], alone)  # type: ignore[union-attr]


def test_seeds_at_one_round_take_one_local_step_call(tmp_path: Path, monkeypatch) -> None:
    calls = []
    algorithm = ALGORITHMS.get("fedadamw")
    original = algorithm.local_step

    def local_step(self, y, g, local, k, info):
        calls.append(y[0].shape[0])
        return original(self, y, g, local, k, info)

    monkeypatch.setattr(algorithm, "local_step", local_step)
    train_together([_cfg(seed, "fedadamw", "fl.rounds=1") for seed in SEEDS], tmp_path)
    assert calls == [3 * 4] * 3  # K 3 calls, each over 3 seeds x 4 clients


def test_the_seeds_train_in_one_stacked_call(tmp_path: Path, monkeypatch) -> None:
    calls = []
    original = SeedsEngine._round

    def spy(active):
        calls.append(len(active))
        original(active)

    monkeypatch.setattr(SeedsEngine, "_round", staticmethod(spy))
    train_together([_cfg(seed) for seed in SEEDS], tmp_path, prepare=prepare64)
    assert calls == [3, 3, 3, 3]  # every round: the three seeds at once


def test_finished_seeds_are_skipped(tmp_path: Path) -> None:
    cfgs = [_cfg(seed) for seed in SEEDS]
    (first,) = train_together(cfgs[:1], tmp_path / "together", save_model=True, prepare=prepare64)
    assert isinstance(first, RunResult) and first.status == "completed"
    results = train_together(cfgs, tmp_path / "together", save_model=True, prepare=prepare64)
    assert [r.status for r in results] == ["skipped", "completed", "completed"]  # type: ignore[union-attr]
    alone = _separately(cfgs, tmp_path / "alone")
    _assert_same_as_separate([r.run_dir for r in results], alone)  # type: ignore[union-attr]


def test_a_killed_group_resumes_each_seed_from_its_checkpoint(tmp_path: Path, monkeypatch) -> None:
    cfgs = [_cfg(seed, "fedadamw") for seed in SEEDS]
    original = Engine._checkpoint

    def checkpoint(self: Engine, done: int, elapsed: float) -> None:
        original(self, done, elapsed)
        if self.cfg.seed == 2:  # seed 1 has its round-2 checkpoint, seeds 2 and 3 start over
            raise Killed

    monkeypatch.setattr(Engine, "_checkpoint", checkpoint)
    with pytest.raises(Killed):
        train_together(cfgs, tmp_path / "together", save_model=True, prepare=prepare64)
    monkeypatch.setattr(Engine, "_checkpoint", original)
    folders = [RunFolder.for_config(tmp_path / "together", cfg) for cfg in cfgs]
    assert [f.checkpoint_round() for f in folders] == [2, 2, None]
    results = train_together(cfgs, tmp_path / "together", save_model=True, prepare=prepare64)
    assert [r.status for r in results] == ["completed"] * 3  # type: ignore[union-attr]
    alone = _separately(cfgs, tmp_path / "alone")
    _assert_same_as_separate(folders := [r.run_dir for r in results], alone)  # type: ignore[union-attr]
    assert all(len(read_metrics(f)) == 5 for f in folders)


def test_a_diverging_seed_ends_alone(tmp_path: Path, monkeypatch) -> None:
    """A seed whose weights turn NaN diverges; its NaNs stay in its rows of the stacked
    computation, and the other seeds go on to what they reach alone."""
    original = VectorizedEngine.round_of

    def round_of(self: VectorizedEngine, r: int, lr: float, diagnostics: bool):
        if self.cfg.seed == 2 and r == 1:
            self.x[0].fill_(float("nan"))
        return original(self, r, lr, diagnostics)

    cfgs = [_cfg(seed) for seed in SEEDS]
    monkeypatch.setattr(VectorizedEngine, "round_of", round_of)
    results = train_together(cfgs, tmp_path / "together", save_model=True, prepare=prepare64)
    monkeypatch.undo()
    statuses = [r.status for r in results]  # type: ignore[union-attr]
    assert statuses == ["completed", "diverged", "completed"]
    assert results[1].summary["diverged_round"] == 2  # type: ignore[union-attr]
    alone = _separately([cfgs[0], cfgs[2]], tmp_path / "alone")
    _assert_same_as_separate([results[0].run_dir, results[2].run_dir], alone)  # type: ignore[union-attr]


def test_runs_that_cannot_stack_train_alone(tmp_path: Path, monkeypatch) -> None:
    def refuse(self):
        raise AssertionError("DP runs do not stack")

    monkeypatch.setattr(SeedsEngine, "run", refuse)
    cfgs = [
        _cfg(seed, "dp_fedavg", "model.name=logreg", "fl.rounds=2", "privacy.clip=1.0")
        for seed in (1, 2)
    ]
    results = train_together(cfgs, tmp_path)
    assert [r.status for r in results] == ["completed", "completed"]  # type: ignore[union-attr]


def test_a_refused_or_busy_run_does_not_stop_the_others(tmp_path: Path) -> None:
    cfgs = [_cfg(seed, "fedavg", "fl.rounds=2") for seed in SEEDS]
    busy = RunFolder.for_config(tmp_path, cfgs[2])

    def prepare(cfg: RunConfig) -> RunSetup:
        if cfg.seed == 1:
            raise FedbenchError("refused")
        return prepare64(cfg)

    with busy.lock():
        results = train_together(cfgs, tmp_path, wait=False, prepare=prepare)
    assert isinstance(results[0], FedbenchError)
    assert isinstance(results[1], RunResult) and results[1].status == "completed"
    assert isinstance(results[2], RunBusyError)


def test_stack_problem_names_what_differs() -> None:
    a, b = prepare_run(_cfg(1)), prepare_run(_cfg(2))
    assert stack_problem(a, b) is None
    other = prepare_run(_cfg(2, "fedavg", "model.name=logreg"))
    assert stack_problem(a, other) == "the models differ in structure"
    private = prepare_run(_cfg(2, "dp_fedavg", "privacy.clip=1.0"))
    assert "DP" in (stack_problem(a, private) or "")


def test_seeds_together_changes_no_run_id_and_needs_the_vectorised_engine() -> None:
    assert _cfg(1).run_id() == _cfg(1, "fedavg", "runtime.seeds_together=5").run_id()
    assert _cfg(1, "fedavg", "runtime.seeds_together=auto").runtime.seeds_together == "auto"
    # The plan decides (tests/engine/test_plan.py): the config loads, and the sequential engine
    # trains the seeds one by one.
    sequential = _cfg(1, "fedavg", "runtime.engine=sequential", "runtime.seeds_together=2")
    assert seeds_group_size(sequential, runs=2, gpus=True) == 1
    vectorized = _cfg(1, "fedavg", "runtime.engine=vectorized", "runtime.seeds_together=2")
    assert seeds_group_size(vectorized, runs=2, gpus=True) == 2
    with pytest.raises(FedbenchError):
        _cfg(1, "fedavg", "runtime.seeds_together=0")
