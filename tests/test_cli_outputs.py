"""--print-config, --dry-run --write-plan, and what a run folder records (data path, git)."""

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from fedbench.config import load_run_config, parse_run_config
from fedbench.engine import train
from fedbench.engine.run_folder import RunFolder
from fedbench.provenance import SOURCE_ROOT, git_state
from tests.conftest import TINY


def test_print_config_is_the_resolved_yaml_and_writes_nothing(run_cli, tmp_path) -> None:
    code, out, err = run_cli(
        "train",
        "configs/demo.yaml",
        "--set",
        "algorithm.alpha=0.1",
        "--print-config",
        "--out",
        str(tmp_path),
    )
    assert code == 0, err
    printed = yaml.safe_load(out)
    expected = load_run_config(Path("configs/demo.yaml"), ["algorithm.alpha=0.1"])
    assert printed == expected.to_dict()
    assert parse_run_config(printed).run_id() == expected.run_id()
    assert out.startswith(f"# run folder: {tmp_path / 'runs' / expected.run_id()}\n")
    assert not (tmp_path / "runs").exists()


def test_dry_run_writes_the_plan_as_json(run_cli, tiny_table_path, tmp_path) -> None:
    plan_file = tmp_path / "plan.json"
    code, out, err = run_cli(
        "run",
        str(tiny_table_path),
        "--dry-run",
        "--write-plan",
        str(plan_file),
        "--out",
        str(tmp_path / "out"),
    )
    assert code == 0, err
    assert f"plan: {plan_file}" in out
    plan = json.loads(plan_file.read_text())
    assert plan["table"] == "tiny" and plan["preset"] is None
    assert [(r["method"], r["seed"]) for r in plan["runs"]] == [
        ("Local SGD", 0),
        ("Local SGD", 1),
        ("FedAdamW", 0),
        ("FedAdamW", 1),
    ]
    run = plan["runs"][2]
    cfg = parse_run_config(run["config"])
    assert cfg.run_id() == run["run_id"] and cfg.algorithm.alpha == 0.5
    assert run["client_steps"] == 3 * 2 * 2  # rounds x clients per round x local steps
    assert plan["client_steps"] == sum(r["client_steps"] for r in plan["runs"])
    assert not (tmp_path / "out").exists()  # a dry run trains nothing
    code, _, err = run_cli(
        "run", str(tiny_table_path), "--dry-run", "--write-plan", str(tmp_path / "no/plan.json")
    )
    assert code == 2 and "does not exist" in err


@pytest.mark.slow
def test_run_folder_records_data_source_and_git_commit(tmp_path) -> None:
    sets = [v for i, v in enumerate(TINY) if i % 2 == 1]
    result = train(load_run_config(None, sets), tmp_path)
    summary = result.summary
    assert summary["data_source"] == "embedded: sklearn.datasets.load_digits"
    assert RunFolder(result.run_dir).data_source() == summary["data_source"]
    head = subprocess.run(
        ["git", "-C", str(SOURCE_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    assert summary["git"] == git_state()
    assert summary["git"]["commit"] == head and len(head) == 40
    # config.yaml stays a loadable run config with the same run id.
    assert load_run_config(result.run_dir / "config.yaml").run_id() == result.run_dir.name


def test_a_file_dataset_records_its_resolved_root(tmp_path, monkeypatch) -> None:
    from fedbench.config import DataConfig
    from fedbench.data.base import resolved_location

    monkeypatch.setenv("FEDBENCH_DATA", str(tmp_path / "d"))
    assert resolved_location(DataConfig(name="cifar10")) == str((tmp_path / "d").resolve())
    path = tmp_path / "x.npz"
    assert resolved_location(DataConfig(name="npz", path=str(path))) == str(path.resolve())
