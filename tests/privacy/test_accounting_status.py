"""Every epsilon fedbench prints says its accounting status and the direction of its error
(fedbench.privacy.status): summary.json, `fedbench epsilon` (run and table configs), the line
`train` ends with and `fedbench runs`; the DP tables draw the accounted (Poisson) mechanism, at
sample and client level, and its epsilon is the RDP accountant's for Poisson sampling."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import pytest

from fedbench.config import load_run_config
from fedbench.engine import train
from fedbench.engine.progress import final_line
from fedbench.privacy.status import accounting_status, short_label, status_line
from fedbench.report.epsilon import privacy_plan
from fedbench.runner.table_config import expand, load_table
from tests.engine.test_engine import tiny_config

DP_TABLES = [f"dp_table{i}" for i in range(2, 12)] + ["dp_table2_vit"]


def test_every_status_has_its_direction_and_why() -> None:
    fixed = accounting_status("sample", "fixed")
    assert (fixed.accounting, fixed.direction) == ("approximate", "may be understated")
    assert "shuffled" in fixed.why and "Chua et al., ICML 2024" in fixed.why
    assert "set privacy.sampling poisson" in fixed.why
    client = accounting_status("client", "fixed")
    assert (client.accounting, client.direction) == ("approximate", "may be understated")
    assert "without replacement" in client.why
    exact = accounting_status("client", "poisson")
    assert (exact.accounting, exact.direction) == ("exact", "not understated")
    bound = accounting_status("sample", "poisson", "clients run fewer steps")
    assert (bound.accounting, bound.direction, bound.why) == (
        "upper bound",
        "overstated",
        "clients run fewer steps",
    )


def test_old_summaries_are_read_with_the_direction_of_their_status() -> None:
    # A privacy_accounting written before `direction` existed, and none at all.
    old = {"model": "m", "accounting": "approximate", "why": "w"}
    assert short_label(old) == "approximate, may be understated"
    assert status_line(old) == "accounting: approximate, may be understated (w)"
    assert short_label(None) == short_label([1]) == "not recorded"


@pytest.mark.engine
@pytest.mark.parametrize(
    ("sampling", "label"),
    [("fixed", "approximate, may be understated"), ("poisson", "exact, not understated")],
)
def test_summary_epsilon_cli_final_line_and_runs_say_status_and_direction(
    tmp_path: Path, run_cli, sampling: str, label: str
) -> None:
    sets = [
        "algorithm.name=dp_fedavg",
        "privacy.noise_multiplier=0.8",
        f"privacy.sampling={sampling}",
    ]
    result = train(tiny_config(*sets), tmp_path)
    summary = json.loads((result.run_dir / "summary.json").read_text())
    accounting = summary["privacy_accounting"]
    assert f"{accounting['accounting']}, {accounting['direction']}" == label
    assert "epsilon" in final_line(summary) and f"; {label})" in final_line(summary)
    args = ["epsilon", "--client-size", "50"]
    for item in sets:
        args += ["--set", item]
    code, out, _ = run_cli(*args)
    assert code == 0 and f"\naccounting: {label} (" in out
    code, out, _ = run_cli("runs", str(tmp_path), "--format", "csv")
    assert code == 0 and label in out
    # A summary.json written before `direction` existed is listed with its status's direction.
    del summary["privacy_accounting"]["direction"]
    (result.run_dir / "summary.json").write_text(json.dumps(summary))
    code, out, _ = run_cli("runs", str(tmp_path), "--format", "csv")
    assert code == 0 and label in out


def test_every_dp_table_draws_the_accounted_mechanism() -> None:
    """The shipped DP tables run privacy.sampling poisson: every cell's epsilon is exact."""
    for name in DP_TABLES:
        runs = expand(load_table(name), seeds=1).runs
        assert runs and all(r.cfg.privacy is not None for r in runs), name
        assert {r.cfg.privacy.sampling for r in runs} == {"poisson"}, name
        accounting = privacy_plan(runs[0].cfg, client_size=1000).accounting()
        assert short_label(accounting) == "exact, not understated", name


def test_the_switch_changed_the_dp_tables_run_ids_not_other_ids() -> None:
    run = expand(load_table("dp_table2"), seeds=1, methods=["DP-FedAvg"]).runs[0]
    fixed = expand(
        load_table("dp_table2"),
        seeds=1,
        methods=["DP-FedAvg"],
        overrides=["privacy.sampling=fixed"],
    ).runs[0]
    assert run.cfg.run_id() != fixed.cfg.run_id()
    # A run config without `sampling` keeps the default (fixed) and its id.
    assert load_run_config(None, ["algorithm.name=dp_fedadam"]).privacy.sampling == "fixed"
    assert load_run_config(None, ["algorithm.name=dp_fedadam"]).run_id() == (
        "dp_fedadam-digits-cnn-s0-97e197ed9c"
    )


#: DP rows with a rule of their own on privatised gradients (DP-FedAvg-LS's Laplacian smoothing,
#: DP-FedAdamW's de-biasing of the noise in v): no client-level form, by design.
GRADIENT_ONLY = {"dp_fedavg_ls", "dp_fedadamw"}


@pytest.mark.parametrize("name", DP_TABLES)
def test_each_dp_table_runs_poisson_at_client_level_too(name: str) -> None:
    """Client-level DP with Poisson client sampling plans exactly for every row of every DP
    table whose algorithm has a client-level form: the row run as its base algorithm (client
    level privatises updates, not gradients, so a dp_ algorithm is refused there by design).
    dp_table7 and dp_table8 hold DP-FedAdamW variants only: they have no client-level row."""
    table = load_table(name)
    planned = 0
    for method, spec in table.methods.items():
        algorithm = (spec.get("algorithm") or {}).get("name") or table.base["algorithm"]["name"]
        if algorithm in GRADIENT_ONLY:
            continue
        sets = [
            "privacy.level=client",
            "privacy.sampling=poisson",
            f"algorithm.name={algorithm.removeprefix('dp_')}",
        ]
        for run in expand(table, seeds=1, methods=[method], overrides=sets).runs:
            accounting = privacy_plan(run.cfg, client_size=100).accounting()
            assert (accounting["accounting"], accounting["direction"]) == (
                "exact",
                "not understated",
            )
            planned += 1
    assert (planned == 0) == (name in ("dp_table7", "dp_table8")), name


@pytest.mark.parametrize(("q", "sigma", "steps"), [(0.02, 1.1, 500), (0.016, 1.0, 2000)])
def test_the_poisson_epsilon_is_the_rdp_accountants(q: float, sigma: float, steps: int) -> None:
    """At sample level with Poisson sampling fedbench's epsilon is Opacus' RDP accountant's for
    the Poisson-subsampled Gaussian (q, sigma, steps); q 0.02, sigma 1.1, 500 steps, delta 1e-5
    is 2.5757 (Google's dp_accounting gives the same to these digits)."""
    from opacus.accountants import RDPAccountant

    batch, n = round(q * 1000), 1000
    rounds = steps  # one local step per round, every client in every round
    cfg = load_run_config(
        None,
        [
            "algorithm.name=dp_fedavg",
            "privacy.sampling=poisson",
            f"privacy.noise_multiplier={sigma}",
            "privacy.delta=1e-5",
            "partition.clients=2",
            "fl.participation=1.0",
            f"fl.rounds={rounds}",
            "fl.local_steps=1",
            f"fl.batch_size={batch}",
        ],
    )
    plan = privacy_plan(cfg, client_size=n)
    assert plan.accounting()["accounting"] == "exact"
    accountant = RDPAccountant()
    accountant.history = [(sigma, batch / n, steps)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = accountant.get_epsilon(delta=1e-5)
    assert plan.epsilon() == expected
    if (q, sigma, steps) == (0.02, 1.1, 500):
        assert math.isclose(plan.epsilon(), 2.5757, abs_tol=5e-5)
