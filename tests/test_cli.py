"""`fedbench list algorithms`: every algorithm with its paper, comm_up and per-client state."""

from typer.testing import CliRunner

from fedbench.algorithms import ALGORITHMS
from fedbench.cli import app


def test_list_algorithms_shows_comm_up_and_state() -> None:
    result = CliRunner().invoke(app, ["list", "algorithms"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    lines = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if "│" in line}
    assert set(ALGORITHMS) <= set(lines)
    assert "2d" in lines["scaffold"] and "c_i" in lines["scaffold"]
    assert "d + B" in lines["fedadamw"]
