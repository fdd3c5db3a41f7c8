"""The CLI: every user error is one line on stderr, exit code 2, no traceback, no run folder."""

import subprocess

import pytest

from fedbench.algorithms import ALGORITHMS
from tests.conftest import TINY, cli_command, cli_env

BAD_INPUTS = {
    "unknown algorithm": (["--set", "algorithm.name=fedmagic"], "unknown algorithm 'fedmagic'"),
    "unknown field": (["--set", "algorithm.gamma=0.3"], "unknown config field 'algorithm.gamma'"),
    "unknown section field": (["--set", "fl.round=3"], "unknown config field 'fl.round'"),
    "participation 0": (["--set", "fl.participation=0"], "fl.participation"),
    "participation > 1": (["--set", "fl.participation=1.5"], "fl.participation"),
    "lr 0": (["--set", "algorithm.lr=0"], "algorithm.lr"),
    "lr negative": (["--set", "algorithm.lr=-0.1"], "algorithm.lr"),
    "rounds 0": (["--set", "fl.rounds=0"], "fl.rounds"),
    "override without =": (["--set", "fl.rounds"], "override 'fl.rounds' has no '='"),
    "override with a space for =": (
        ["--set", "fl.rounds", "5"],
        "override 'fl.rounds' has no '='; write fl.rounds=5",
    ),
    "override with a space, then another option": (
        ["--set", "fl.rounds", "5", "--set", "fl.local_steps=2"],
        "write fl.rounds=5",
    ),
    "missing dataset": (
        [
            "--set",
            "data.name=cifar10",
            "--set",
            "data.download=false",
            "--set",
            "data.root=/nonexistent",
        ],
        "dataset cifar10 not found",
    ),
    "fmnist data.root missing": (
        ["--set", "data.name=fmnist", "--set", "data.root=/nonexistent"],
        "data.root /nonexistent does not exist",
    ),
    "missing npz": (
        ["--set", "data.name=npz", "--set", "data.path=/nonexistent/x.npz"],
        "npz file /nonexistent/x.npz not found",
    ),
    "unknown dataset": (["--set", "data.name=imagenet21k"], "unknown dataset"),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_line_exit_2(case, run_cli, tmp_path):
    args, expected = BAD_INPUTS[case]
    code, out, err = run_cli("train", *args, "--out", str(tmp_path))
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert expected in lines[0]
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_missing_and_malformed_yaml(run_cli, tmp_path):
    code, _, err = run_cli("train", str(tmp_path / "nope.yaml"), "--out", str(tmp_path))
    assert code == 2 and "not found" in err and len(err.strip().splitlines()) == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("fl: {rounds: 3\nmodel: [\n")
    code, _, err = run_cli("train", str(bad), "--out", str(tmp_path))
    assert code == 2 and "malformed YAML" in err and "line" in err
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n- 2\n")
    code, _, err = run_cli("train", str(listy), "--out", str(tmp_path))
    assert code == 2 and "mapping" in err
    assert not (tmp_path / "runs").exists()


def test_unknown_cli_option_is_exit_2(run_cli):
    code, _, err = run_cli("train", "--frobnicate")
    assert code == 2 and "frobnicate" in err


def test_list_commands(run_cli):
    code, out, _ = run_cli("list", "algorithms")
    assert code == 0 and "fedadamw" in out and "local_adamw" in out
    code, out, _ = run_cli("list", "models")
    assert code == 0 and "resnet18" in out and "vit_tiny" in out
    code, out, _ = run_cli("list", "datasets")
    assert code == 0 and "digits" in out and "npz" in out
    code, _, err = run_cli("list", "planets")
    assert code == 2 and "planets" in err


def test_console_script_runs_a_tiny_training(tmp_path):
    """The real entry point (`python -m fedbench`) end to end, as a user would call it."""
    proc = subprocess.run(
        cli_command("train", *TINY, "--out", str(tmp_path)),
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "completed" in proc.stdout
    proc = subprocess.run(
        cli_command("train", "--set", "fl.rounds=-1", "--out", str(tmp_path)),
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_list_algorithms_shows_comm_up_and_state(run_cli) -> None:
    code, out, _ = run_cli("list", "algorithms")
    assert code == 0
    lines = {line.split("│")[1].strip(): line for line in out.splitlines() if "│" in line}
    assert set(ALGORITHMS) <= set(lines)
    assert "2d" in lines["scaffold"] and "c_i" in lines["scaffold"]
    assert "d + B" in lines["fedadamw"]
