"""What `fedbench run/ablate/tune` ask of the runner, tested without the command line:
--seeds/--methods parsing, the launcher checks, the plan of a request (seeds, rows, tuned
values), the dry run, the Ctrl-C message and the tune's apply hint."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from rich.console import Console

from fedbench.errors import FedbenchError, Interrupted
from fedbench.runner.orchestrate import (
    SweepRequest,
    TuneRequest,
    apply_hint,
    check_tune,
    interrupted_line,
    request_plan,
    sweep,
    tune_table,
)
from fedbench.runner.selection import check_launcher, check_workers, parse_methods, parse_seeds
from fedbench.runner.table_config import column_key


def test_parse_seeds_count_list_and_errors() -> None:
    assert parse_seeds(None) is None
    assert parse_seeds("3") == 3
    assert parse_seeds("0,3,7") == [0, 3, 7]
    assert parse_seeds(" 7, ") == [7]  # one explicit seed
    with pytest.raises(FedbenchError, match="neither a count nor a list"):
        parse_seeds("a,b")
    with pytest.raises(FedbenchError, match="--seeds is empty"):
        parse_seeds(",")


def test_parse_methods_strips_and_drops_empty_labels() -> None:
    assert parse_methods(None) is None
    assert parse_methods("") is None
    assert parse_methods(" FedAvg, FedAdamW ,") == ["FedAvg", "FedAdamW"]


@pytest.mark.parametrize(
    ("launcher", "workers", "address", "message"),
    [
        ("slurm", None, None, "unknown --launcher 'slurm'; use local or ray"),
        ("local", 0, None, "--workers must be at least 1"),
        ("ray", 2, None, "--workers is for the local launcher"),
        ("local", None, "10.0.0.1:6379", "--ray-address needs --launcher ray"),
    ],
)
def test_check_launcher_refuses_bad_combinations(
    launcher: str, workers: int | None, address: str | None, message: str
) -> None:
    with pytest.raises(FedbenchError) as caught:
        check_launcher(launcher, workers, address, dry_run=True)
    assert str(caught.value).startswith(message)


def test_check_launcher_accepts_good_combinations() -> None:
    check_launcher("local", 4, None, dry_run=False)
    check_launcher("ray", None, "10.0.0.1:6379", dry_run=True)  # a plan needs no Ray
    check_workers(None)
    check_workers(1)


def _small(**fields: object) -> SweepRequest:
    base: dict = {"name": "table1", "preset": "quick", "seeds": "0,3", "methods": "FedAvg"}
    return SweepRequest(**{**base, **fields})  # type: ignore[arg-type]


def test_request_plan_selects_seeds_rows_and_applies_tuned_values(tmp_path: Path) -> None:
    plan = request_plan(_small())
    assert plan.name == "table1-quick"
    assert {r.method for r in plan.runs} == {"FedAvg"}
    assert sorted({r.seed for r in plan.runs}) == [0, 3]
    assert len(plan.runs) == 8  # 4 columns x 2 seeds

    first = plan.runs[0]
    tuned = tmp_path / "tuned.yaml"
    rows = {"FedAvg": {column_key(first.setting): {"values": {"algorithm.lr": 0.0123}}}}
    tuned.write_text(yaml.safe_dump({"table": "table1", "rows": rows}))
    tuned_plan = request_plan(_small(tuned_file=tuned))
    assert tuned_plan.name == "table1-quick-tuned"
    lrs = {r.cfg.algorithm.lr for r in tuned_plan.runs if r.setting == first.setting}
    assert lrs == {0.0123}
    assert {r.cfg.algorithm.lr for r in tuned_plan.runs} != {0.0123}  # other columns keep theirs


def test_request_plan_of_an_ablation_and_a_bad_name() -> None:
    with pytest.raises(FedbenchError, match="no ablation named 'nope'"):
        request_plan(SweepRequest("nope", "ablation"))


def _consoles() -> tuple[Console, Console]:
    return Console(record=True, width=300), Console(record=True, width=300, stderr=True)


def test_dry_run_prints_the_plan_writes_it_on_request_and_runs_nothing(tmp_path: Path) -> None:
    console, err = _consoles()
    plan_file = tmp_path / "plan.json"
    result = sweep(
        _small(out=tmp_path, dry_run=True, plan_file=plan_file, seeds="0,9"),
        console=console,
        err_console=err,
        resume="fedbench run table1",
    )
    assert result is None
    text = console.export_text()
    assert "note: table1 lists seeds 0,1,2,3,4; also running seeds 9" in text
    assert f"plan: {plan_file}" in text
    assert "8 runs (8 distinct), 6,400 client steps" in text
    assert plan_file.is_file()
    assert not (tmp_path / "runs").exists()


def test_interrupted_sweep_says_how_far_it_got_and_how_to_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fedbench.runner.sweep as sweep_module

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_module, "run_sweep", interrupted)
    console, err = _consoles()
    with pytest.raises(Interrupted) as caught:
        sweep(_small(out=tmp_path), console=console, err_console=err, resume="fedbench run x")
    assert str(caught.value) == (
        "interrupted table1-quick after 0 of 8 runs; finished runs are kept and unfinished "
        f"ones resume from their checkpoints in {tmp_path / 'runs'}; resume: fedbench run x"
    )
    plan = request_plan(_small())
    assert interrupted_line(plan, tmp_path, "again") == str(caught.value).replace(
        "fedbench run x", "again"
    )


def test_tune_checks_and_apply_hint() -> None:
    with pytest.raises(FedbenchError, match="--workers must be at least 1"):
        check_tune(TuneRequest("table1", workers=0))
    with pytest.raises(FedbenchError, match=r"--seed -1 is out of range"):
        check_tune(TuneRequest("table1", seed=-1))
    check_tune(TuneRequest("table1", seed=2**32 - 1))
    request = TuneRequest("table1", preset="quick", overrides=["fl.rounds=3", "data.name=a b"])
    assert apply_hint(request, "run", Path("out/t/tuned.yaml")) == (
        "wrote out/t/tuned.yaml; apply it with `fedbench run table1 --preset quick "
        "--set fl.rounds=3 --set 'data.name=a b' --tuned out/t/tuned.yaml`"
    )
    assert apply_hint(TuneRequest("cfg.yaml"), "train", Path("t.yaml")) == (
        "wrote t.yaml; apply it with --set with the values above"
    )


def test_tune_table_shows_the_best_values_per_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fedbench.runner.tune as tune_module

    seen: dict = {}

    def fake_tune(plan, fields, **kwargs):  # type: ignore[no-untyped-def]
        seen.update(plan=plan, fields=fields, **kwargs)
        rows = [("FedAvg", "a", {"algorithm.lr": 0.012345, "fl.local_steps": 5}, 61.234, 4, 1, 0)]
        return tune_module.TuneResult(tmp_path / "t-tune", {}, rows, {("FedAvg", "a"): "CNN"})

    monkeypatch.setattr(tune_module, "tune", fake_tune)
    request = TuneRequest(
        "table1",
        preset="quick",
        methods="FedAvg",
        grid=["algorithm.lr=0.01,0.1"],
        out=tmp_path,
        workers=2,
        val_fraction=0.2,
    )
    view, applied = tune_table(request, on_trial=print)
    assert [r.method for r in seen["plan"].runs] == ["FedAvg"] * 4  # one seed per cell
    assert [f.key for f in seen["fields"]] == ["algorithm.lr"]
    assert (seen["batch"], seen["val_fraction"], seen["out"]) == (2, 0.2, tmp_path)
    assert view.title == "table1-quick: tuned on a 0.2 validation split"
    assert view.rows == [
        ["FedAvg", "CNN", "algorithm.lr=0.01235, fl.local_steps=5", "61.23", "4/1/0"]
    ]
    assert view.fold
    tuned = tmp_path / "t-tune" / "tuned.yaml"
    assert (
        applied
        == f"wrote {tuned}; apply it with `fedbench run table1 --preset quick --tuned {tuned}`"
    )
