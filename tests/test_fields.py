"""`fedbench list algorithms NAME`: every hyperparameter with type, default, range and meaning,
read from the pydantic models."""

from typing import Literal

import pytest
from pydantic import BaseModel, Field

from fedbench.algorithms import ALGORITHMS
from fedbench.fields import field_rows, range_label, type_label


def test_labels_by_hand() -> None:
    class Base(BaseModel):
        lr: float = Field(default=0.1, gt=0, description="step size")
        beta: float = Field(default=0.9, ge=0, lt=1)
        mode: Literal["a", "b"] = "a"
        clip: float | None = Field(default=None, le=5)
        on: bool = False

    class Child(Base):
        lr: float = Field(default=0.5, gt=0)  # only the default changes

    rows = {r.name: r for r in field_rows(Child)}
    assert rows["lr"] == type(rows["lr"])("lr", "float", "0.5", "> 0", "step size")
    assert (rows["beta"].range, rows["beta"].type) == ("[0, 1)", "float")
    assert (rows["mode"].type, rows["mode"].default) == ("a | b", "a")
    assert (rows["clip"].type, rows["clip"].default, rows["clip"].range) == (
        "float or null",
        "null",
        "<= 5",
    )
    assert rows["on"].default == "false"
    assert type_label(list[int]) == "list[int]"
    from fedbench.config import RunConfig, RuntimeConfig

    assert {r.name: r.default for r in field_rows(RuntimeConfig)}["loggers"] == "[]"
    assert {r.name: r.default for r in field_rows(RunConfig)}["fl"] == "(a section)"
    assert range_label(Child.model_fields["mode"]) == ""


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_every_hyperparameter_of_every_algorithm_has_a_meaning(name: str) -> None:
    rows = field_rows(ALGORITHMS.get(name).Params, skip=("name",))
    missing = [r.name for r in rows if not r.meaning]
    assert not missing, f"{name}: no description for {missing}"


def test_list_algorithms_name_prints_every_field(run_cli) -> None:
    code, out, err = run_cli("list", "algorithms", "fedadamw")
    assert code == 0, err
    rows = {
        cells[0]: cells
        for line in out.splitlines()
        if "│" in line
        for cells in [[c.strip() for c in line.split("│")[1:-1]]]
    }
    assert set(ALGORITHMS.get("fedadamw").Params.model_fields) - {"name"} <= set(rows)
    assert rows["alpha"][1:4] == ["float", "0.5", ">= 0"]
    assert rows["alpha"][4].startswith("weight of the global")
    assert rows["beta2"][1:4] == ["float", "0.999", "[0, 1)"]
    assert rows["m_agg"][1:3] == ["bool", "false"]
    code, _, err = run_cli("list", "models", "cnn")
    assert code == 2 and "list algorithms NAME" in err
