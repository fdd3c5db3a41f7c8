"""plan_privacy's refusals of combinations whose privacy fedbench cannot state: an algorithm
without a dp_ twin (`supports_privacy` False: MOON, FedExP, a personalised method that has not
stated its personal part's privacy) under sample-level DP is refused in one line with exit 2;
client level, which clips and noises the upload whatever the rule, runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.algorithms import ALGORITHMS

SMALL = [
    "--set", "model.name=logreg", "--set", "partition.clients=4", "--set", "fl.rounds=1",
    "--set", "fl.participation=0.5", "--set", "fl.local_steps=2", "--set", "fl.batch_size=16",
    "--set", "privacy.noise_multiplier=1.0", "--set", "privacy.clip=1.0",
]  # fmt: skip


@pytest.mark.parametrize("name", ["moon", "fedexp"])
def test_sample_level_dp_of_a_rule_without_a_dp_twin_is_refused(
    run_cli, tmp_path: Path, name: str
) -> None:
    assert not ALGORITHMS.get(name).supports_privacy
    code, out, err = run_cli(
        "train", "--set", f"algorithm.name={name}", *SMALL, "--out", str(tmp_path)
    )
    assert code == 2
    (line,) = [x for x in (out + err).splitlines() if x.strip()]
    assert f"algorithm {name} states no sample-level privacy" in line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.parametrize("name", ["ditto", "apfl", "perfedavg_hf", "pfedme", "local_only"])
def test_the_personal_methods_state_theirs(run_cli, tmp_path: Path, name: str) -> None:
    """Their personal gradients are privatised and counted (docs/personalised.md, DP)."""
    assert ALGORITHMS.get(f"dp_{name}").dp_twin_of == name
    extra = ["--set", "partition.client_test_fraction=0.2"]
    code, out, err = run_cli(
        "train", "--set", f"algorithm.name={name}", *SMALL, *extra, "--out", str(tmp_path)
    )
    assert code == 0, out + err
    assert "epsilon" in out + err


def test_client_level_dp_runs_a_rule_without_a_twin(run_cli, tmp_path: Path) -> None:
    code, out, err = run_cli(
        "train", "--set", "algorithm.name=moon", *SMALL, "--set", "privacy.level=client",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0, out + err
