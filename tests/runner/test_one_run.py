"""`fedbench train` and `fedbench bench` below the command line: the printed config, the Ctrl-C
line of one run, the bench listing and the suite's refusal of a CONFIG."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fedbench.config import load_run_config
from fedbench.data.base import resolved_location
from fedbench.engine.bench import result_listing
from fedbench.errors import FedbenchError, Interrupted
from fedbench.runner.bench_suite import measure
from fedbench.runner.one_run import config_text, train_command, train_one
from tests.conftest import TINY


def test_config_text_is_the_resolved_config_after_two_comment_lines(tmp_path: Path) -> None:
    cfg = load_run_config(None, ["fl.rounds=7", "algorithm.name=fedavg"])
    text = config_text(cfg, tmp_path)
    first, second, *_ = text.splitlines()
    assert first == f"# run folder: {tmp_path / 'runs' / cfg.run_id()}"
    assert second == f"# data.path / data.root resolve to: {resolved_location(cfg.data)}"
    assert yaml.safe_load(text) == cfg.to_dict()  # the comments are YAML comments
    assert yaml.safe_load(text)["fl"]["rounds"] == 7


def test_train_one_turns_ctrl_c_into_the_resume_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fedbench.engine as engine

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "train", interrupted)
    cfg = load_run_config(None, ["fl.rounds=5"])
    with pytest.raises(Interrupted) as caught:
        train_one(cfg, tmp_path, save_model=False, console=None, resume="fedbench train x")
    assert str(caught.value) == (
        f"interrupted run {cfg.run_id()} (no round); no checkpoint yet "
        "(runtime.checkpoint_every), the rerun starts at round 0; resume: fedbench train x"
    )


def test_result_listing_rounds_floats_and_right_aligns_values() -> None:
    shown = result_listing({"workload": "cnn/digits", "algorithm": "fedavg", "overhead": 1.23456})
    assert shown.title == "fedbench bench: cnn/digits (fedavg)"
    assert shown.rows == [
        ["workload", "cnn/digits"],
        ["algorithm", "fedavg"],
        ["overhead", "1.235"],
    ]
    assert shown.right == ("value",)


def test_a_suite_runs_its_own_configs() -> None:
    with pytest.raises(FedbenchError, match="--suite runs its own configs; drop CONFIG"):
        measure(
            Path("cfg.yaml"),
            [],
            rounds=1,
            warmup=0,
            repeats=1,
            threads=None,
            suite="table1",
            out_dir=Path("unused"),
        )


TINY_SETS = [arg for arg in TINY if arg != "--set"]


def test_train_command_says_how_the_run_ended_and_skips_it_when_done(tmp_path: Path) -> None:
    first = train_command(
        None, TINY_SETS, tmp_path, save_model=False, print_config=False, console=None, resume=""
    )
    cfg = load_run_config(None, TINY_SETS)
    run_dir = tmp_path / "runs" / cfg.run_id()
    (line,) = first.lines
    assert line.startswith(f"completed: {run_dir}  test_acc ")
    assert first.error is None and first.config is None
    again = train_command(
        None, TINY_SETS, tmp_path, save_model=False, print_config=False, console=None, resume=""
    )
    assert again.lines == [f"run {cfg.run_id()} is already done (completed): {run_dir}"]


def test_train_command_prints_the_config_without_training(tmp_path: Path) -> None:
    shown = train_command(
        None,
        ["fl.rounds=7"],
        tmp_path,
        save_model=False,
        print_config=True,
        console=None,
        resume="",
    )
    assert shown.lines == [] and shown.error is None
    assert shown.config == config_text(load_run_config(None, ["fl.rounds=7"]), tmp_path)
    assert not (tmp_path / "runs").exists()


def test_train_command_reports_a_diverged_run_as_an_error(tmp_path: Path) -> None:
    sets = [*TINY_SETS, "algorithm.name=fedavg", "algorithm.lr=1.0e12", "algorithm.grad_clip=null"]
    shown = train_command(
        None, sets, tmp_path, save_model=False, print_config=False, console=None, resume=""
    )
    assert shown.lines[0].startswith("diverged: ")
    assert shown.error is not None and "non-finite" in shown.error
