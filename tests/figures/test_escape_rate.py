"""The escape-rate experiment: each particle takes the registered rule's server step, the
results equal those of the version that copied the rules, the censored rate, the exponent fit
on exact 1/k and k^-1/2 data, the error on too few points, and the figure command end to end on
a tiny setup."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from fedbench.algorithms import RoundInfo
from fedbench.errors import FedbenchError
from fedbench.figures.escape_rate import (
    EscapeSetup,
    bootstrap_neg_log_rates,
    escape_rate,
    escape_rounds,
    escape_run,
    fit_exponent,
    registry_algorithm,
    st_grad,
    verdict,
)
from fedbench.figures.particles import Particles

REFERENCE = Path(__file__).with_name("escape_reference.json")


@pytest.mark.parametrize("name", ["fedavgm", "fedadam", "fedadamom"])
def test_each_particle_takes_its_own_registered_server_step(name: str) -> None:
    # Three particles whose updates differ in scale by 10^3: FedAdamom's model-wide mean of v
    # must be each particle's own, and every particle's step bitwise the rule's on its own.
    gen = torch.Generator().manual_seed(0)
    scales = torch.tensor([1.0, 1e-3, 1e3], dtype=torch.float64)[None, :, None]
    deltas = torch.randn(5, 3, 4, generator=gen, dtype=torch.float64) * scales
    setup = EscapeSetup(dims=4)
    particles = Particles(registry_algorithm(name, setup))
    x = [torch.zeros(3, 4, dtype=torch.float64)]
    server = particles.init_server_state(x)
    alone = [registry_algorithm(name, setup) for _ in range(3)]
    xs = [[torch.zeros(4, dtype=torch.float64)] for _ in range(3)]
    servers = [a.init_server_state(own) for a, own in zip(alone, xs, strict=True)]
    rows = [torch.zeros(3, 4, dtype=torch.float64)]  # the rule on the stacked rows as one model
    rows_server = alone[0].init_server_state(rows)
    for r in range(5):
        info = RoundInfo(r, setup.local_lr, 2, 10, 4)
        particles.server_update(x, {"delta": [deltas[r]]}, server, info)
        alone[0].server_update(rows, {"delta": [deltas[r]]}, rows_server, info)
        for p in range(3):
            alone[p].server_update(xs[p], {"delta": [deltas[r, p]]}, servers[p], info)
    assert torch.equal(x[0], torch.stack([own[0] for own in xs]))
    # FedAvgM and FedAdam are elementwise; FedAdamom's step on the stacked rows (one model)
    # would mix the particles through its mean of v.
    assert torch.equal(rows[0], x[0]) == (name != "fedadamom")


def test_the_experiment_equals_its_copied_rules_version() -> None:
    # Recorded before the experiment used the registry's rules through the round protocol:
    # the same escape rounds, the surviving particles' positions to 1e-12 (the registry's
    # FedAdam lerps m where the copy wrote beta1 m + (1 - beta1) Delta, and its local SGD is
    # one fused y - lr g: the arithmetic differs in the last bits).
    ref = json.loads(REFERENCE.read_text())
    setup = replace(EscapeSetup(), trials=ref["trials"], rounds=ref["rounds"], seed=ref["seed"])
    for name, per_k in ref["optimizers"].items():
        for k, want in per_k.items():
            escaped_at, x = escape_run(name, float(k), setup)
            assert escaped_at.tolist() == want["escaped_at"], (name, k)
            expected = [[float.fromhex(v) for v in row] for row in want["x"]]
            torch.testing.assert_close(
                x,
                torch.tensor(expected, dtype=torch.float64).reshape(-1, setup.dims),
                rtol=1e-12,
                atol=1e-12,
            )
    # The reference holds a k where no trial escapes, one where some do and one where all do.
    escapes = {
        k: sum(e > 0 for e in w["escaped_at"]) for k, w in ref["optimizers"]["fedadam"].items()
    }
    assert escapes == {"1.0": 0, "4.0": 4, "16.0": 12}


def test_styblinski_tang_critical_points_and_the_censored_rate() -> None:
    from fedbench.figures.escape_rate import ST_A, ST_B

    assert abs(float(st_grad(torch.tensor(ST_A, dtype=torch.float64)))) < 1e-4
    assert abs(float(st_grad(torch.tensor(ST_B, dtype=torch.float64)))) < 1e-4
    # Two escapes (rounds 3 and 5), one trial censored at 10: 2 / (3 + 10 + 5) per round.
    assert escape_rate(np.array([3, 0, 5]), 10) == pytest.approx(2 / 18)
    assert math.isnan(escape_rate(np.array([0, 0]), 10))


KS = np.geomspace(1.0, 16.0, 8)


@pytest.mark.parametrize("p", [1.0, 0.5])
@pytest.mark.parametrize("prefactor", ["none", "fitted"])
def test_exponent_fit_recovers_p_within_its_interval(p: float, prefactor: str) -> None:
    ys = 2.0 + 6.0 * KS**-p - (np.log(KS) if prefactor == "fitted" else 0.0)
    rng = np.random.default_rng(0)
    boots = ys + rng.normal(0.0, 0.03, size=(300, len(KS)))
    fit = fit_exponent(KS, ys, boots, prefactor)
    assert fit.p == pytest.approx(p, abs=0.011)
    assert fit.interval[0] <= p <= fit.interval[1]
    assert fit.b == pytest.approx(6.0, rel=0.05)
    assert fit.c == pytest.approx(-1.0 if prefactor == "fitted" else 0.0, abs=0.05)
    # Over a decade of k with this noise the interval excludes the rival law: the claim decides.
    assert verdict(fit, p) is True
    assert verdict(fit, 1.5 - p) is False


def test_over_k_1_to_4_the_two_laws_cannot_be_told_apart() -> None:
    ks = np.linspace(1.0, 4.0, 7)
    assert np.corrcoef(1 / ks, ks**-0.5)[0, 1] > 0.99
    assert np.corrcoef(1 / KS, KS**-0.5)[0, 1] < np.corrcoef(1 / ks, ks**-0.5)[0, 1]


def test_too_few_points_is_an_error_naming_the_minimum() -> None:
    ys = np.array([5.0, 4.0, np.nan, 3.0, np.nan, np.nan, np.nan, np.nan])
    with pytest.raises(FedbenchError, match="at least 5 sharpness values"):
        fit_exponent(KS, ys, None, "fitted")
    with pytest.raises(FedbenchError, match="at least 4 sharpness values"):
        fit_exponent(KS, ys, None, "none")


def test_bootstrap_rates_resample_the_trials() -> None:
    times = [np.array([1, 2, 0, 0]), np.array([0, 0, 0, 0])]
    boot = bootstrap_neg_log_rates(times, 4, 50, 0)
    assert boot.shape == (50, 2)
    assert np.isnan(boot[:, 1]).all()  # nothing escaped: no rate
    assert np.nanmin(boot[:, 0]) >= -math.log(4 / 4) - 1e-12  # at most one escape per round


@pytest.mark.slow
def test_escape_is_rarer_at_low_sharpness_and_the_figure_command(tmp_path: Path) -> None:
    setup = replace(EscapeSetup(), trials=60, rounds=60)
    low, high = (escape_rounds("fedavgm", k, setup) for k in (1.0, 16.0))
    assert (low > 0).mean() < (high > 0).mean()  # flatter (k = 1) holds the particles longer

    from typer.testing import CliRunner

    from fedbench.cli import app

    done = CliRunner().invoke(
        app,
        [
            "figure", "fedadamom-escape", "--out", str(tmp_path), "--set", "trials=40",
            "--set", "rounds=80", "--set", "bootstrap=20", "--set", "min_neg_log_gamma=0",
        ],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    folder = tmp_path / "figures" / "fedadamom-escape"
    saved = json.loads((folder / "claims.json").read_text())
    assert saved["settings"]["trials"] == 40
    assert len(saved["claims"]) == 3
    assert all(c["statistic"].startswith("fitted exponent p") for c in saved["claims"])
    assert (folder / "fedadamom-escape.png").stat().st_size > 10_000
    assert (folder / "fedadamom-escape.pdf").stat().st_size > 1_000
    assert "neg_log_gamma" in (folder / "fedadamom-escape.csv").read_text().splitlines()[0]
    bad = CliRunner().invoke(app, ["figure", "nope"])  # main() turns this into exit code 2
    assert isinstance(bad.exception, FedbenchError) and "fedadamom-escape" in str(bad.exception)


def test_too_few_rounds_is_an_error_not_a_nan_slope(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from fedbench.cli import app

    done = CliRunner().invoke(
        app,
        ["figure", "fedadamom-escape", "--out", str(tmp_path), "--set", "rounds=5",
         "--set", "trials=5", "--set", "bootstrap=10"],
    )  # fmt: skip
    assert isinstance(done.exception, FedbenchError)  # main() exits 2 with this one line
    assert "needs at least 5 sharpness values" in str(done.exception)
    assert not (tmp_path / "figures" / "fedadamom-escape" / "claims.json").exists()
