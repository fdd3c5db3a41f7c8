"""One run id for one computation: `X` with a privacy section and its plain twin `dp_X`."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.algorithms.registry import ALGORITHMS
from fedbench.config import load_run_config
from tests.conftest import TINY

PRIVATE = ["privacy.noise_multiplier=1.0", "privacy.clip=1.0"]


def _twins() -> list[str]:
    return [name for name, cls in ALGORITHMS.items() if cls.dp_twin_of is not None]


def test_every_plain_twin_and_its_base_with_privacy_share_one_run_id() -> None:
    twins = _twins()
    assert "dp_fedavg" in twins and "dp_scaffold" in twins and "dp_fedadamw" not in twins
    for twin in twins:
        base = ALGORITHMS.get(twin).dp_twin_of
        plain = load_run_config(None, [f"algorithm.name={base}", *PRIVATE])
        dp = load_run_config(None, [f"algorithm.name={twin}", *PRIVATE])
        assert plain.run_id() == dp.run_id(), twin
        assert plain.run_id().startswith(f"{twin}-")
        # The config itself keeps the name it was given (config.yaml records what was asked).
        assert plain.algorithm.name == base


def test_hyperparameters_still_tell_twin_runs_apart() -> None:
    a = load_run_config(None, ["algorithm.name=fedavg", "algorithm.lr=0.05", *PRIVATE])
    b = load_run_config(None, ["algorithm.name=dp_fedavg", *PRIVATE])
    c = load_run_config(None, ["algorithm.name=dp_fedavg", "algorithm.lr=0.05", *PRIVATE])
    assert a.run_id() != b.run_id() and a.run_id() == c.run_id()


def test_a_dp_variant_with_its_own_rule_keeps_its_own_id() -> None:
    plain = load_run_config(None, ["algorithm.name=fedadamw", *PRIVATE])
    dp = load_run_config(None, ["algorithm.name=dp_fedadamw", *PRIVATE])
    assert plain.run_id() != dp.run_id()
    assert plain.run_id().startswith("fedadamw-") and dp.run_id().startswith("dp_fedadamw-")


@pytest.mark.parametrize(
    ("overrides", "run_id"),
    [
        # Ids from before the twins were merged: non-private configs and dp_ names keep theirs.
        (["algorithm.name=fedavg"], "fedavg-digits-cnn-s0-a16270a269"),
        (["algorithm.name=fedadamw"], "fedadamw-digits-cnn-s0-a8b5a65f78"),
        (["algorithm.name=dp_fedavg"], "dp_fedavg-digits-cnn-s0-6ad368e8c3"),
        # (was dp_fedadamw-digits-cnn-s0-77b1bc2495 with the former debias_floor default 0.1)
        (["algorithm.name=dp_fedadamw"], "dp_fedadamw-digits-cnn-s0-92fd1b4987"),
        # fedavg with a privacy section was fedavg-digits-cnn-s0-44c4b0842c: now dp_fedavg's.
        (
            ["algorithm.name=fedavg", "privacy.noise_multiplier=1.0"],
            "dp_fedavg-digits-cnn-s0-6ad368e8c3",
        ),
    ],
)
def test_existing_run_ids_are_kept(overrides: list[str], run_id: str) -> None:
    assert load_run_config(None, overrides).run_id() == run_id


@pytest.mark.engine
def test_the_same_private_run_is_not_trained_twice(tmp_path: Path, run_cli) -> None:
    common = [
        "train",
        "--out",
        str(tmp_path),
        *TINY,
        "--set",
        "fl.rounds=2",
        *(x for item in PRIVATE for x in ("--set", item)),
    ]
    code, out, err = run_cli(*common, "--set", "algorithm.name=fedavg")
    assert code == 0, out + err
    code, out, err = run_cli(*common, "--set", "algorithm.name=dp_fedavg")
    assert code == 0, out + err
    assert "is already done (completed)" in out
    (only,) = (tmp_path / "runs").iterdir()
    assert only.name.startswith("dp_fedavg-")
