"""Non-finite and out-of-range numbers are config errors naming the field: one line, exit 2,
nothing written. Every float field of the run config and of every algorithm's hyperparameters is
tried with every spelling of inf and nan (the models share one rule, in Strict), and each of them
through the CLI."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from fedbench.algorithms import ALGORITHMS
from fedbench.config import RunConfig, load_run_config
from fedbench.errors import FedbenchError

NON_FINITE = ["inf", ".inf", "-.inf", ".nan", "nan", "1e999"]


def _members(annotation: Any) -> tuple[Any, ...]:
    if get_origin(annotation) in (Union, types.UnionType):
        return get_args(annotation)
    return (annotation,)


def float_fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    """The dotted keys of every float field of `model` and of the config models inside it."""
    keys = []
    for name, field in model.model_fields.items():
        for member in _members(field.annotation):
            if member is float:
                keys.append(prefix + name)
            elif isinstance(member, type) and issubclass(member, BaseModel):
                keys += float_fields(member, f"{prefix}{name}.")
    return keys


RUN_FIELDS = float_fields(RunConfig)
ALGORITHM_FIELDS = sorted(
    {(name, key) for name, cls in ALGORITHMS.items() for key in float_fields(cls.Params)}
)


def test_the_walk_finds_the_float_fields_of_every_section() -> None:
    assert {"partition.alpha", "fl.participation", "privacy.clip", "eval.target"} <= set(RUN_FIELDS)
    names = {key for _, key in ALGORITHM_FIELDS}
    assert {"lr", "weight_decay", "alpha", "server_lr"} <= names
    assert len(ALGORITHM_FIELDS) > 3 * len(list(ALGORITHMS.items()))


def _one_line_error(result: tuple[int, str, str], field: str) -> str:
    code, _, err = result
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert f"'{field}'" in err, err
    return err


def _load_error(overrides: list[str]) -> str:
    """The one-line error of `fedbench train --set ...`, from the function the CLI calls."""
    with pytest.raises(FedbenchError) as caught:
        load_run_config(None, overrides)
    return str(caught.value)


def test_every_float_refuses_every_non_finite_spelling() -> None:
    cases = [([], key) for key in RUN_FIELDS]
    cases += [([f"algorithm.name={name}"], f"algorithm.{key}") for name, key in ALGORITHM_FIELDS]
    for before, key in cases:
        for value in NON_FINITE:
            message = _load_error([*before, f"{key}={value}"])
            assert f"'{key}'" in message and "finite" in message, (before, key, value, message)
            assert "\n" not in message


def test_through_the_cli_one_line_exit_2_nothing_written(run_cli, tmp_path: Path) -> None:
    """Each run config float and one float of each algorithm (the spellings taking turns): the
    CLI prints the same one-line error and exits with code 2."""
    cases = [([], key) for key in RUN_FIELDS]
    seen: set[str] = set()
    for name, key in ALGORITHM_FIELDS:
        if name not in seen:
            seen.add(name)
            cases.append(([f"algorithm.name={name}"], f"algorithm.{key}"))
    for i, (before, key) in enumerate(cases):
        sets = [
            x
            for item in [*before, f"{key}={NON_FINITE[i % len(NON_FINITE)]}"]
            for x in ("--set", item)
        ]
        err = _one_line_error(run_cli("train", *sets, "--out", str(tmp_path)), key)
        assert "finite" in err, err
    assert not any(tmp_path.iterdir())


def test_the_issue_s_cases_in_a_yaml_file(run_cli, tmp_path: Path) -> None:
    cases = {
        "algorithm: {name: fedadamw, lr: .inf}": "algorithm.lr",
        "algorithm: {name: fedadamw, weight_decay: .inf}": "algorithm.weight_decay",
        "algorithm: {name: fedadamw, alpha: .inf}": "algorithm.alpha",
        "algorithm: {name: fedavg, lr: .nan}": "algorithm.lr",
        "partition: {alpha: .inf}": "partition.alpha",
    }
    for text, field in cases.items():
        path = tmp_path / "c.yaml"
        path.write_text(text + "\n")
        _one_line_error(run_cli("train", str(path), "--out", str(tmp_path / "o")), field)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("1.0e+20", "integer"),
        ("100000000000000000000", "less than 18446744073709551616"),
        ("18446744073709551616", "less than 18446744073709551616"),
        ("-1", "greater than or equal to 0"),
        ("1e20", "valid integer"),  # YAML 1.1 reads 1e20 (no dot) as a string
        ("1.5", "valid integer"),
    ],
)
def test_a_seed_out_of_range_is_an_error_not_a_traceback(value, why, run_cli, tmp_path) -> None:
    for field in ("seed", "partition.seed", "data.users.seed"):
        err = _one_line_error(
            run_cli("train", "--set", f"{field}={value}", "--out", str(tmp_path)), field
        )
        assert why in err, err
    assert not any(tmp_path.iterdir())


def test_the_largest_seed_is_accepted(run_cli, tmp_path: Path) -> None:
    code, out, err = run_cli("train", "--set", f"seed={2**64 - 1}", "--print-config")
    assert code == 0, err
    assert f"seed: {2**64 - 1}" in out


def number_fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    """The dotted keys of every int or float field (Annotated, Optional or in a union with a
    Literal) of `model` and of the config models inside it."""
    keys = []
    for name, field in model.model_fields.items():
        members = [
            get_args(m)[0] if get_origin(m) is Annotated else m for m in _members(field.annotation)
        ]
        if {int, float} & set(members):
            keys.append(prefix + name)
        for member in members:
            if isinstance(member, type) and issubclass(member, BaseModel):
                keys += number_fields(member, f"{prefix}{name}.")
    return keys


def test_no_number_field_takes_a_boolean() -> None:
    """`runtime.seeds_together=true` was taken as 1 (pydantic reads a bool as an int): every
    number field of the run config and of every algorithm refuses true and false, in one line."""
    run_keys = number_fields(RunConfig)
    assert {"runtime.seeds_together", "runtime.client_chunk", "fl.rounds", "seed"} <= set(run_keys)
    assert {"data.users.count", "partition.clients", "eval.every", "algorithm.lr"} <= set(run_keys)
    cases = [([], key) for key in run_keys]
    cases += [
        ([f"algorithm.name={name}"], f"algorithm.{key}")
        for name, cls in ALGORITHMS.items()
        for key in number_fields(cls.Params)
    ]
    for before, key in cases:
        for value in ("true", "false"):
            message = _load_error([*before, f"{key}={value}"])
            assert f"'{key}'" in message and f"{value} is a boolean; give a number" in message, (
                before,
                key,
                message,
            )
            assert "\n" not in message
    assert load_run_config(None, ["data.download=false"]).data.download is False  # a bool field


def test_a_boolean_seed_in_a_table_is_refused(run_cli, tiny_table_path: Path) -> None:
    text = tiny_table_path.read_text().replace("seeds:\n- 0\n- 1\n", "seeds:\n- 0\n- true\n")
    assert "- true" in text
    tiny_table_path.write_text(text)
    code, _, err = run_cli("run", str(tiny_table_path), "--dry-run")
    assert code == 2 and err.count("\n") == 1 and "true is a boolean; give a number" in err, err
