"""The escape-rate experiment: its server rules are fedbench's, the censored rate, the exponent
fit on exact 1/k and k^-1/2 data, the error on too few points, and the figure command end to end
on a tiny setup."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from fedbench.algorithms import ALGORITHMS, ParamSpec, RoundInfo
from fedbench.errors import FedbenchError
from fedbench.figures.escape_rate import (
    EscapeSetup,
    _server,
    bootstrap_neg_log_rates,
    escape_rate,
    escape_rounds,
    fit_exponent,
    st_grad,
    verdict,
)

SPEC = ParamSpec(names=["x"], shapes=[torch.Size([4])], heads={})
FIELDS = {
    "fedavgm": {"momentum": 0.9, "server_lr": 1.0},
    "fedadam": {"beta1": 0.9, "beta2": 0.99, "tau": 1e-3, "server_lr": 0.15},
    "fedadamom": {"beta2": 0.1, "eps_m": 1e-3, "server_lr": 1.0},
}


@pytest.mark.parametrize("name", ["fedavgm", "fedadam", "fedadamom"])
def test_batched_server_rules_equal_the_algorithms(name: str) -> None:
    gen = torch.Generator().manual_seed(0)
    deltas = torch.randn(5, 2, 4, generator=gen, dtype=torch.float64)  # rounds, particles, d
    batched = torch.zeros(2, 4, dtype=torch.float64)
    step, state = _server(name, EscapeSetup()), {}
    cls = ALGORITHMS.get(name)
    algs = [cls(cls.Params(name=name, **FIELDS[name]), SPEC, num_clients=1) for _ in range(2)]
    xs = [[torch.zeros(4, dtype=torch.float64)] for _ in range(2)]
    servers = [a.init_server_state(x) for a, x in zip(algs, xs)]
    for r in range(5):
        step(batched, deltas[r], state)
        for p in range(2):
            algs[p].server_update(
                xs[p], {"delta": [deltas[r, p]]}, servers[p], RoundInfo(r, 0.1, 1, 1, 1)
            )
    torch.testing.assert_close(batched, torch.stack([x[0] for x in xs]), rtol=1e-12, atol=1e-12)


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
    from dataclasses import replace

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
