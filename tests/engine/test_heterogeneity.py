"""System heterogeneity: per-client local steps (fl.local_steps_min) and client dropout
(fl.dropout), both drawn per (seed, round, client), through the engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedbench.engine import train
from fedbench.engine.schedule import (
    client_local_steps,
    client_schedule,
    drops_out,
    round_clients,
    sampled_clients,
)
from tests.conftest import read_metrics
from tests.engine.test_engine import tiny_config


def test_dropout_draws_are_deterministic_independent_and_at_the_rate() -> None:
    draws = [drops_out(7, 3, c, 0.3) for c in range(4000)]
    assert draws == [drops_out(7, 3, c, 0.3) for c in range(4000)]
    assert 0.27 < sum(draws) / len(draws) < 0.33
    assert draws != [drops_out(7, 4, c, 0.3) for c in range(4000)]  # depends on the round
    assert not any(drops_out(7, 3, c, 0.0) for c in range(100))


def test_round_clients_are_the_sampled_ones_that_stay() -> None:
    for r in range(20):
        sampled = sampled_clients(1, r, 50, 10)
        kept = round_clients(1, r, 50, 10, dropout=0.4)
        assert set(kept) <= set(sampled)
        assert kept == [c for c in sampled if not drops_out(1, r, c, 0.4)]
        assert round_clients(1, r, 50, 10) == sampled
    schedule = client_schedule(1, 5, 50, 10, 0.4)
    assert list(schedule) == [round_clients(1, r, 50, 10, 0.4) for r in range(5)]
    assert schedule[3] == round_clients(1, 3, 50, 10, 0.4)
    assert list(schedule[1:3]) == [round_clients(1, r, 50, 10, 0.4) for r in (1, 2)]


def test_client_local_steps_cover_the_range_deterministically() -> None:
    steps = [client_local_steps(0, r, c, 6, 2) for r in range(30) for c in range(10)]
    assert set(steps) == {2, 3, 4, 5, 6}
    assert steps == [client_local_steps(0, r, c, 6, 2) for r in range(30) for c in range(10)]
    assert client_local_steps(0, 1, 2, 6, None) == 6 and client_local_steps(0, 1, 2, 6, 6) == 6


def test_engine_trains_each_client_its_own_steps_and_drops_lost_updates(tmp_path: Path) -> None:
    cfg = tiny_config(
        "algorithm.name=fednova",
        "fl.local_steps=6",
        "fl.local_steps_min=2",
        "fl.dropout=0.4",
        "fl.rounds=6",
        "eval.every=3",
    )
    result = train(cfg, tmp_path)
    summary = json.loads((result.run_dir / "summary.json").read_text())
    schedule = client_schedule(cfg.seed, 6, 6, 3, 0.4)
    trained = sum(len(clients) for clients in schedule)
    assert sum(summary["participation_counts"]) == trained < 6 * 3  # some updates were lost
    assert summary["clients_per_round"] == 3
    last = read_metrics(result.run_dir)[-1]
    assert last["comm_up"] == pytest.approx(summary["comm_up"] * trained)
    assert result.status == "completed" and last["test_acc"] > 30
    # same config, same numbers (the draws are seeded)
    again = train(cfg, tmp_path / "again")
    assert read_metrics(again.run_dir)[-1]["test_acc"] == last["test_acc"]


def test_a_round_whose_clients_all_drop_leaves_the_model(tmp_path: Path) -> None:
    cfg = tiny_config("fl.dropout=0.99", "fl.participation=0.2", "eval.every=1")
    assert all(not clients for clients in client_schedule(cfg.seed, 4, 6, 1, 0.99))
    rows = read_metrics(train(cfg, tmp_path).run_dir)
    assert len({row["test_acc"] for row in rows}) == 1  # nothing trained: x stays x_0
    assert rows[-1]["comm_up"] == 0.0


def test_local_steps_min_above_local_steps_is_a_config_error(run_cli) -> None:
    code, _, err = run_cli("train", "--set", "fl.local_steps=3", "--set", "fl.local_steps_min=5")
    assert code == 2 and "local_steps_min 5 exceeds local_steps 3" in err
    assert len(err.strip().splitlines()) == 1


def test_vectorized_engine_falls_back_for_heterogeneous_steps(tmp_path: Path) -> None:
    from fedbench.engine.run import select_engine
    from fedbench.engine.run_folder import RunFolder
    from fedbench.engine.setup import prepare_run
    from fedbench.engine.vectorized import VectorizedEngine

    cfg = tiny_config("runtime.engine=vectorized", "fl.local_steps_min=1")
    setup = prepare_run(cfg)
    engine = select_engine(setup, RunFolder.for_config(tmp_path, cfg), None)
    assert not isinstance(engine, VectorizedEngine)
