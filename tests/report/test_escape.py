"""The escape-rate experiment: its server rules are fedbench's, the rate and fit formulas, and the
figure command end to end on a tiny setup."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from fedbench.algorithms import ALGORITHMS, ParamSpec, RoundInfo
from fedbench.errors import FedbenchError
from fedbench.report.escape import (
    EscapeSetup,
    _server,
    escape_rate,
    linear_fit,
    run_escape,
    st_grad,
)

SPEC = ParamSpec(names=["x"], shapes=[torch.Size([4])], heads={})
FIELDS = {
    "fedavgm": {"momentum": 0.9, "server_lr": 1.0},
    "fedadam": {"beta1": 0.9, "beta2": 0.99, "tau": 1e-3, "server_lr": 0.05},
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


def test_styblinski_tang_critical_points_and_rate_and_fit() -> None:
    from fedbench.report.escape import ST_A, ST_B

    assert abs(float(st_grad(torch.tensor(ST_A, dtype=torch.float64)))) < 1e-4
    assert abs(float(st_grad(torch.tensor(ST_B, dtype=torch.float64)))) < 1e-4
    assert escape_rate(1 - math.exp(-0.5), 10) == pytest.approx(0.05)
    assert math.isnan(escape_rate(0.0, 10)) and math.isnan(escape_rate(1.0, 10))
    fit = linear_fit([1.0, 2.0, 3.0, 4.0], [3.0, 5.0, math.nan, 9.0])
    assert (fit.slope, fit.intercept, fit.points) == pytest.approx((2.0, 1.0, 3))
    assert fit.pearson_r == pytest.approx(1.0)


@pytest.mark.slow
def test_escape_is_rarer_at_low_sharpness_and_the_figure_command(tmp_path: Path) -> None:
    result = run_escape(EscapeSetup(ks=(1.0, 4.0), trials=60, rounds=60))
    rows = result["optimizers"]["fedavgm"]["rows"]
    assert rows[0]["escaped"] < rows[1]["escaped"]  # flatter (k = 1) holds the particles longer

    from typer.testing import CliRunner

    from fedbench.cli import app

    done = CliRunner().invoke(
        app,
        [
            "figure", "fedadamom-escape", "--out", str(tmp_path),
            "--set", "trials=10", "--set", "rounds=3",
        ],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    folder = tmp_path / "figures" / "fedadamom-escape"
    saved = json.loads((folder / "claims.json").read_text())
    assert saved["extra"]["result"]["summary_reports"]["pearson_r_inv_k"] == 0.998
    assert saved["settings"]["trials"] == 10
    assert len(saved["claims"]) == 3
    assert (folder / "fedadamom-escape.png").stat().st_size > 10_000
    assert (folder / "fedadamom-escape.pdf").stat().st_size > 1_000
    assert "optimizer" in (folder / "fedadamom-escape.csv").read_text().splitlines()[0]
    bad = CliRunner().invoke(app, ["figure", "nope"])  # main() turns this into exit code 2
    assert isinstance(bad.exception, FedbenchError) and "fedadamom-escape" in str(bad.exception)
