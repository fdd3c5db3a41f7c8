"""A sweep whose data or weights are missing stops before training (exit code 2, one line per
missing thing); `--dry-run` checks the same and warns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fedbench.engine.run_folder import RunFolder
from fedbench.runner.preflight import MissingResources, check_plan, require_resources
from fedbench.runner.sweep import run_sweep
from fedbench.runner.table_config import expand, parse_table_config
from tests.conftest import tiny_table_data


def table_without_data(tmp_path: Path, **model) -> dict:
    """The tiny table on CIFAR-100 under an empty data root, with downloads off (no network)."""
    data = tiny_table_data()
    (tmp_path / "empty").mkdir(exist_ok=True)
    data["base"]["data"] = {"name": "cifar100", "root": str(tmp_path / "empty"), "download": False}
    data["base"]["model"].update(model)
    return data


def write_table(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_sweep_without_its_dataset_is_exit_2_and_runs_nothing(tmp_path, run_cli):
    path = write_table(tmp_path, table_without_data(tmp_path))
    out = tmp_path / "o"
    code, _, err = run_cli("run", str(path), "--out", str(out))
    assert code == 2
    lines = err.strip().splitlines()
    assert lines[0] == "error: tiny: 1 missing before training, nothing was run:"
    assert len(lines) == 2  # one line per missing thing
    # the dataset, the path searched and how to provide it
    assert "dataset cifar100 not found" in lines[1]
    assert str(tmp_path / "empty" / "cifar-100-python") in lines[1]
    assert "extract cifar-100-python/" in lines[1]
    assert lines[1].endswith("[needed by 4 runs]")
    assert not out.exists()


def test_dry_run_checks_the_same_and_says_so(tmp_path, run_cli, tiny_table_path):
    path = write_table(tmp_path, table_without_data(tmp_path))
    code, out, err = run_cli("run", str(path), "--dry-run", "--out", str(tmp_path / "o"))
    # A plan needs no data: the plan, then what is missing as a warning (the same loader message).
    assert code == 0 and "4 runs" in out
    assert err.startswith("warning: tiny: 1 missing") and "dataset cifar100 not found" in err
    code, out, _ = run_cli("run", str(tiny_table_path), "--dry-run", "--out", str(tmp_path / "o"))
    assert code == 0
    assert "checked before training: datasets digits; pretrained weights none needed" in out
    assert not (tmp_path / "o").exists()


def test_missing_data_and_weights_are_listed_together(tmp_path: Path):
    data = table_without_data(tmp_path, name="vit_micro", pretrained=True)
    data["base"]["data"]["image_size"] = 32
    plan = expand(parse_table_config(data))
    checked = check_plan(plan)
    assert [m.what for m in checked.missing] == ["dataset cifar100", "weights vit_micro"]
    assert "model vit_micro has no pretrained weights" in checked.missing[1].message
    with pytest.raises(MissingResources) as info:
        require_resources(plan)
    assert len(str(info.value).splitlines()) == 3


def test_weights_missing_for_present_data(tmp_path: Path):
    data = tiny_table_data()
    data["base"]["model"] = {"name": "vit_micro", "pretrained": True}
    plan = expand(parse_table_config(data))
    checked = check_plan(plan)
    assert checked.datasets == ["digits"]
    assert [m.what for m in checked.missing] == ["weights vit_micro"]
    assert "has no pretrained weights" in checked.missing[0].message


def test_finished_runs_need_no_data(tmp_path: Path):
    plan = expand(parse_table_config(table_without_data(tmp_path)))
    for run in plan.runs:
        folder = RunFolder.for_config(tmp_path, run.cfg)
        folder.path.mkdir(parents=True)
        folder.summary.write_text(json.dumps({"status": "completed"}))
    checked = require_resources(plan, tmp_path)
    assert checked.missing == [] and checked.finished == 4
    with pytest.raises(MissingResources):
        require_resources(plan)  # without OUT every run is unfinished


def test_run_sweep_checks_before_writing_anything(tmp_path: Path):
    plan = expand(parse_table_config(table_without_data(tmp_path)))
    with pytest.raises(MissingResources):
        run_sweep(plan, tmp_path / "o", workers=1)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["run", "{table}", "--workers", "1"],
        ["run", "{table}", "--dry-run"],
        ["run", "{table}", "--smoke"],
        ["tune", "{table}", "--grid", "algorithm.lr=0.01,0.1"],
        ["train", "--set", "data.name=digits"],
    ],
)
@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ("runtime.cuda_graphs=on", "runtime.cuda_graphs on needs a CUDA device"),
        ("runtime.device=cuda", "no CUDA GPU is available"),
    ],
)
def test_a_setting_that_cannot_run_here_is_one_line_in_every_command(
    tmp_path, run_cli, tiny_table_path, command, setting, says
):
    """Issue 45: `run` recorded every cell as unsupported and exited 0, and `tune` wrote a
    tuned.yaml with no values; every command now refuses such a setting the way `train` does,
    before anything is written."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is there: these settings can run")
    out = tmp_path / "o"
    args = [a.replace("{table}", str(tiny_table_path)) for a in command]
    code, _, err = run_cli(*args, "--set", setting, "--out", str(out))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and says in err
    assert not out.exists()
