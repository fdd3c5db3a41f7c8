"""Issue 13 item 9: help without placeholders, --version, explicit seeds, one blocks default,
complete list descriptions."""

import pytest

import fedbench
from fedbench.algorithms import ALGORITHMS
from fedbench.catalog import first_line
from fedbench.data import DATASETS
from fedbench.models import MODELS
from fedbench.runner.sweep import make_plan, seeds_note


@pytest.mark.parametrize("command", [[], ["run"], ["train"], ["epsilon"], ["list"]])
def test_help_prints_no_bool_placeholder(run_cli, command) -> None:
    """The bug: typer's rich help printed `<bool>` after every flag (--dry-run <bool>)."""
    code, out, _ = run_cli(*command, "--help")
    assert code == 0 and "--help" in out
    assert "<bool>" not in out
    if command == ["run"]:
        assert "  --dry-run  " in out and "--set KEY=VALUE" in out


def test_version(run_cli) -> None:
    code, out, _ = run_cli("--version")
    assert code == 0 and out.strip() == f"fedbench {fedbench.__version__}"


def test_seeds_beyond_the_table_are_said_and_a_list_is_exact(run_cli, tmp_path) -> None:
    """The bug: --seeds 9 on a 5-seed table ran seeds 0-8 without a word."""
    plan = make_plan("table1", seeds=7, methods=["FedAvg"])
    assert sorted({r.seed for r in plan.runs}) == list(range(7))
    assert seeds_note(plan) == (
        "note: table1 lists seeds 0,1,2,3,4; also running seeds 5,6 "
        "(give an explicit list with --seeds 0,3,7)"
    )
    assert seeds_note(make_plan("table1", seeds=3, methods=["FedAvg"])) is None
    code, out, err = run_cli(
        "run",
        "table1",
        "--preset",
        "quick",  # embedded data: the dry run checks that a sweep's data is there
        "--methods",
        "FedAvg",
        "--seeds",
        "0,3,7",
        "--dry-run",
        "--out",
        str(tmp_path),
    )
    assert code == 0, err
    rows = [line for line in out.splitlines() if "FedAvg" in line and line.startswith("│")]
    assert rows and all("0,3,7" in row for row in rows)
    assert "note: table1 lists seeds 0,1,2,3,4; also running seeds 7" in out
    code, _, err = run_cli("run", "table1", "--seeds", "0,x", "--dry-run")
    assert code == 2 and "--seeds '0,x' is neither a count nor a list" in err


def test_blocks_command_defaults_to_fedadamws_blocks(run_cli) -> None:
    """The bug: `fedbench blocks` defaulted to hessian while FedAdamW trains with its own default."""
    default = ALGORITHMS.get("fedadamw").Params().blocks
    code, out, err = run_cli("blocks", "logreg")
    assert code == 0, err
    assert f"logreg: blocks: {default}" in out


def test_every_model_and_dataset_has_a_whole_description() -> None:
    """The bug: `list models` showed empty cells (resnet18, vit_tiny) and cut sentences."""
    for name, fn in [*MODELS.items(), *DATASETS.items()]:
        text = first_line(fn.__doc__)
        assert len(text) > 15, name
    digits = first_line(DATASETS.get("digits").__doc__)
    assert digits.endswith("normalised with the training mean and std.")
