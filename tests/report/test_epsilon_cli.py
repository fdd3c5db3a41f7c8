"""Issue 13 item 5: `fedbench epsilon` accepts table configs (path or name) and prints epsilon per
(row, column) of the plan, or of the --methods / --column picks."""

import pytest

from fedbench.config import load_run_config
from fedbench.report.epsilon import describe_privacy, privacy_plan, table_epsilons
from fedbench.runner.sweep import make_plan

TABLE = "configs/dp/dp_table2.yaml"


def _rows(out: str) -> list[list[str]]:
    """The listing's rows; a folded cell's further lines (an empty first cell) joined onto it."""
    rows: list[list[str]] = []
    for line in out.splitlines():
        if "│" not in line:
            continue
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if rows and not cells[0]:
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
        else:
            rows.append(cells)
    return rows


def test_epsilon_of_a_shipped_dp_table_config(run_cli) -> None:
    """The bug: every shipped DP config was refused ("this is a table config")."""
    code, out, err = run_cli(
        "epsilon",
        TABLE,
        "--client-size",
        "1000",
        "--methods",
        "DP-FedAvg,DP-FedSAM",
        "--seeds",
        "2",
    )
    assert code == 0, err
    rows = _rows(out)
    assert [r[0] for r in rows] == ["DP-FedAvg"] * 4 + ["DP-FedSAM"] * 4
    assert rows[0][1] == "CIFAR-10 / Dir-0.6"
    # The same cell computed by hand from its run config: a single run's plan.
    plan = make_plan("dp_table2", methods=["DP-FedSAM"], seeds=[0])
    cfg = plan.runs[0].cfg
    expected = privacy_plan(cfg, client_size=1000).epsilon()
    seed0 = table_epsilons(plan, client_size=1000)
    assert seed0[0][2] == expected
    # The table reports the worst over its seeds (0 and 1 here), at least seed 0's.
    assert float(rows[4][2]) >= round(expected, 2) - 0.005
    # DP-FedSAM privatises two gradients per step: it spends more than DP-FedAvg.
    assert float(rows[4][2]) > float(rows[0][2])
    # Each cell says how its epsilon relates to the mechanism that runs (issue 40).
    assert rows[4][5].startswith("accounting: ") and rows[4][5] in describe_privacy(cfg, 1000)


def test_epsilon_by_table_name_with_a_column_pick(run_cli) -> None:
    code, out, err = run_cli(
        "epsilon",
        "dp_table2",
        "--client-size",
        "1000",
        "--column",
        "partition.alpha=0.1",
        "--column",
        "data.name=cifar100",
        "--seeds",
        "1",
    )
    assert code == 0, err
    rows = _rows(out)
    assert len(rows) == 6 and {r[1] for r in rows} == {"CIFAR-100 / Dir-0.1"}
    cfg = load_run_config(
        None,
        [
            "algorithm.name=dp_fedavg",
            "privacy.noise_multiplier=1.0",
            "privacy.clip=0.1",
            "partition.clients=50",
            "fl.rounds=300",
            "fl.participation=0.2",
            "fl.local_steps=50",
            "fl.batch_size=50",
        ],
    )
    assert rows[0][2] == f"{privacy_plan(cfg, client_size=1000).epsilon():.2f}"


def test_epsilon_picks_that_do_not_exist_are_one_line_errors(run_cli) -> None:
    code, _, err = run_cli("epsilon", "dp_table2", "--column", "data.nme=cifar10")
    assert code == 2 and "did you mean 'data.name'?" in err
    code, _, err = run_cli("epsilon", "dp_table2", "--column", "data.name=cifar1000")
    assert code == 2 and "no value 'cifar1000'" in err
    code, _, err = run_cli("epsilon", "table1", "--client-size", "10")
    assert code == 2 and "no private run" in err


@pytest.mark.parametrize("size", ["-5", "0"])
@pytest.mark.parametrize("config", [[], [TABLE]])
def test_a_client_size_below_one_is_one_line(size: str, config: list[str], run_cli) -> None:
    # Main: exit 0 and an epsilon ("q = 1 (n_i = B)").
    sets = ["--set", "algorithm.name=dp_fedavg"] if not config else []
    code, out, err = run_cli("epsilon", *config, "--client-size", size, *sets)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert f"--client-size {size}: give the samples per client, a positive number" in err


def test_epsilon_columns_say_what_runs_under_a_preset(run_cli) -> None:
    code, out, err = run_cli(
        "epsilon",
        "dp_table2",
        "--preset",
        "quick",
        "--methods",
        "DP-FedAvg",
        "--seeds",
        "1",
        "--column",
        "partition.alpha=0.6",
        "--client-size",
        "100",
    )
    assert code == 0, err
    columns = [r[1] for r in _rows(out)]
    assert columns == ["digits for CIFAR-10 / Dir-0.6", "digits for CIFAR-100 / Dir-0.6"]
    assert "data.name=cifar10" not in out
