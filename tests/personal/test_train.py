"""The personalised methods end to end through the engine: both executors, the protocol's
columns, unseen clients never trained, and a kill/resume with the store spilled to disk that
reproduces the uninterrupted run exactly. A method helper adds its name to METHODS."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedbench.config import RunConfig, load_run_config
from fedbench.engine import train
from fedbench.engine.loop import Engine
from fedbench.errors import FedbenchError
from fedbench.personal.setup import unseen_clients
from fedbench.personal.summary import COLUMNS, STATS
from tests.conftest import read_metrics, strip_elapsed

#: Every personalised method, with the settings its quick run needs.
METHODS: dict[str, tuple[str, ...]] = {
    "local_only": ("algorithm.lr=0.05", "algorithm.finetune_steps=2"),
    "fedavg_ft": ("algorithm.lr=0.05", "algorithm.finetune_steps=2"),
    # pfl-split: the split-model methods
    "fedbabu": ("algorithm.lr=0.05", "algorithm.finetune_steps=2"),
    "fedbn": ("algorithm.lr=0.05", "algorithm.finetune_steps=2", "model.name=cnn_bn"),
    "fedper": ("algorithm.lr=0.05", "algorithm.finetune_steps=2"),
    "fedrep": ("algorithm.lr=0.05", "algorithm.finetune_steps=2"),
    "lg_fedavg": ("algorithm.lr=0.05", "algorithm.finetune_steps=2"),
}


def config(algorithm: str, *extra: str) -> RunConfig:
    return load_run_config(
        None,
        [
            f"algorithm.name={algorithm}",
            "model.name=cnn",
            "partition.kind=dirichlet",
            "partition.alpha=0.1",
            "partition.clients=8",
            "partition.client_test_fraction=0.2",
            "fl.participation=0.5",
            "fl.rounds=4",
            "fl.local_steps=3",
            "fl.batch_size=16",
            "eval.every=2",
            "eval.train_subset=200",
            "eval.unseen_clients=0.25",
            "runtime.checkpoint_every=2",
            "runtime.device=cpu",
            *extra,
        ],
    )


def personal_row(run_dir: Path) -> dict:
    return read_metrics(run_dir)[-1]


@pytest.mark.parametrize("method", sorted(METHODS))
def test_method_runs_on_both_executors(tmp_path: Path, method: str) -> None:
    rows = {}
    for engine in ("sequential", "vectorized"):
        cfg = config(method, *METHODS[method], f"runtime.engine={engine}")
        result = train(cfg, tmp_path / engine)
        assert result.status == "completed"
        rows[engine] = personal_row(result.run_dir)
    row = rows["sequential"]
    assert row["personal_clients"] == 6 and row["unseen_clients"] == 2
    for column in COLUMNS:
        for stat in STATS:
            assert 0.0 <= row[f"{column}_{stat}"] <= 100.0 or stat == "std"
        assert row[f"{column}_p10"] <= row[f"{column}_mean"]
    # The executors agree: accuracies are counts of the same predictions.
    for key, value in row.items():
        if key.endswith(("_mean", "_wmean", "_p10", "_std")) and "acc" in key:
            assert rows["vectorized"][key] == pytest.approx(value, abs=1e-9), key


def test_unseen_clients_never_train(tmp_path: Path) -> None:
    result = train(config("local_only", *METHODS["local_only"]), tmp_path)
    unseen = unseen_clients(0.25, 8, 0)
    assert len(unseen) == 2
    counts = result.summary["participation_counts"]
    assert [counts[c] for c in unseen] == [0, 0]
    assert sum(counts) == 4 * 3  # S = round(0.5 * 6) clients a round, from the 6 that train


def test_global_algorithm_gets_the_columns(tmp_path: Path) -> None:
    """eval.personal on a global algorithm: the same columns, the global model on every
    client, no fine-tuning (before = after)."""
    cfg = config("fedavg", "algorithm.lr=0.05", "eval.personal=true")
    row = personal_row(train(cfg, tmp_path).run_dir)
    assert row["personal_clients"] == 6 and row["unseen_clients"] == 2
    for stat in STATS:
        assert row[f"personal_acc_{stat}"] == row[f"personal_ft_acc_{stat}"]


def test_global_run_ids_and_rows_unchanged(tmp_path: Path) -> None:
    """The new eval fields hash only where they act: a run without them keeps its id."""
    plain = load_run_config(None, ["algorithm.name=fedavg"])
    noop = load_run_config(
        None, ["algorithm.name=fedavg", "eval.personal=false", "eval.unseen_clients=0"]
    )
    assert plain.run_id() == noop.run_id()
    spilled = load_run_config(None, ["algorithm.name=fedavg", "runtime.client_state_memory=1"])
    assert spilled.run_id() == plain.run_id()  # a memory setting, not a result


def test_personal_run_needs_client_test_data() -> None:
    from fedbench.engine.setup import prepare_run

    cfg = config("local_only", "partition.client_test_fraction=0")
    with pytest.raises(FedbenchError, match="client_test_fraction"):
        prepare_run(cfg)


@pytest.mark.parametrize(
    ("method", "extra", "message"),
    [
        ("fedrod", ("privacy.noise_multiplier=1.0",), "class counts"),
        ("local_only", ("eval.unseen_clients=0.99",), "holds out all 8 clients"),
    ],
)
def test_refused_combinations(method: str, extra: tuple[str, ...], message: str) -> None:
    from fedbench.engine.setup import prepare_run

    with pytest.raises(FedbenchError, match=message):
        prepare_run(config(method, *extra))
    with pytest.raises(FedbenchError, match=r"set eval\.personal: true"):
        prepare_run(config("fedavg", "eval.unseen_clients=0.2"))


class Killed(BaseException):
    """Stands for a kill (not an Exception: the run is not recorded as failed)."""


@pytest.mark.parametrize("engine", ["sequential", "vectorized"])
def test_resume_with_spilled_store_is_bit_exact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """A bound of ~1.5 personal models (cnn: 53,002 floats = 207 KiB) spills most clients'
    models to disk; killed after the round-2 checkpoint and resumed, the run equals the
    uninterrupted one in every metric and in the final model."""
    extra = (*METHODS["local_only"], f"runtime.engine={engine}", "runtime.client_state_memory=0.3")
    cfg = config("local_only", *extra)
    fresh = train(cfg, tmp_path / "fresh", save_model=True).run_dir
    original = Engine._checkpoint

    def checkpoint(self: Engine, done: int, elapsed: float) -> None:
        original(self, done, elapsed)
        assert self.client_states.spilled > 0  # the bound is in effect
        raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(Engine, "_checkpoint", checkpoint)
        with pytest.raises(Killed):
            train(cfg, tmp_path / "killed", save_model=True)
    (run_dir,) = (tmp_path / "killed" / "runs").iterdir()
    assert any((run_dir / "client_states").iterdir())
    resumed = train(cfg, tmp_path / "killed", save_model=True)
    assert resumed.status == "completed"
    assert strip_elapsed(read_metrics(resumed.run_dir)) == strip_elapsed(read_metrics(fresh))
    a = torch.load(resumed.run_dir / "model.pt", weights_only=True)
    b = torch.load(fresh / "model.pt", weights_only=True)
    assert all(torch.equal(a[k], b[k]) for k in a)
