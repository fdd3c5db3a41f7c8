"""Nothing a command writes leaves --out, whatever the names in a table config, a preset or the
command line hold (`..`, absolute paths, separators): every path derived from a name goes
through fedbench.engine.run_folder.child_folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fedbench.engine.run_folder import child_folder, safe_name


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def _table(tmp_path: Path, name: str) -> Path:
    """A one-run table named `name` (1 round, logreg on digits) with a preset named like it."""
    data = {
        "table": name,
        "base": {
            "data": {"name": "digits", "augment": False},
            "partition": {"clients": 4},
            "model": {"name": "logreg"},
            "fl": {"rounds": 1, "participation": 0.5, "local_steps": 1, "batch_size": 16},
            "eval": {"every": 1, "train_subset": 100},
            "runtime": {"checkpoint_every": 0, "device": "cpu"},
        },
        "methods": {"A": {"algorithm": {"name": "fedavg", "lr": 0.1}}},
        "seeds": [0],
        "presets": {name: {"fl.local_steps": 2}},
    }
    path = tmp_path / "configs" / "evil.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


def _evil_names(tmp_path: Path) -> list[str]:
    """`..` up and out, an absolute path next to --out, and separators."""
    return ["../../escaped", str(tmp_path / "abs" / "escaped"), "a/b\\c", ".."]


def _assert_inside(tmp_path: Path, out: Path, before: set[Path]) -> None:
    new = _files(tmp_path) - before
    outside = sorted(str(p) for p in new if not p.resolve().is_relative_to(out.resolve()))
    assert not outside, f"written outside --out: {outside}"


@pytest.mark.parametrize("index", range(4))
def test_run_and_ablate_write_only_inside_out(tmp_path: Path, run_cli, index: int) -> None:
    name = _evil_names(tmp_path)[index]
    config = _table(tmp_path, name)
    out = tmp_path / "work" / "out"
    before = _files(tmp_path)
    # ablate is run's sweep for an ablation table: one name is enough to cover it.
    for command in ("run", "ablate") if index == 0 else ("run",):
        code, stdout, err = run_cli(command, str(config), "--preset", name, "--out", str(out))
        assert code == 0, err
        report = child_folder(out, f"{name}-{name}")
        assert (report / "summary.csv").is_file()
        assert f"report: {report}" in stdout.replace("\n", "")
    _assert_inside(tmp_path, out, before)


@pytest.mark.parametrize("index", range(4))
def test_tune_writes_its_study_and_tuned_yaml_inside_out(tmp_path: Path, run_cli, index) -> None:
    pytest.importorskip("optuna")
    name = _evil_names(tmp_path)[index]
    config = _table(tmp_path, name)
    out = tmp_path / "work" / "out"
    before = _files(tmp_path)
    code, stdout, err = run_cli(
        "tune", str(config), "--grid", "algorithm.lr=0.1", "--rounds", "1", "--out", str(out)
    )
    assert code == 0, err
    folder = child_folder(out, f"{name}-tune")
    assert (folder / "tuned.yaml").is_file() and (folder / "study.db").is_file()
    assert f"wrote {folder / 'tuned.yaml'}" in stdout.replace("\n", "")
    _assert_inside(tmp_path, out, before)


def test_report_writes_only_into_its_table_folder(tmp_path: Path, run_cli) -> None:
    name = "../../escaped"
    config = _table(tmp_path, name)
    out = tmp_path / "work" / "out"
    assert run_cli("run", str(config), "--out", str(out))[0] == 0
    folder = child_folder(out, name)
    before = _files(tmp_path)
    code, _, err = run_cli("report", str(folder))
    assert code == 0, err
    new = _files(tmp_path) - before
    assert new <= {p for p in _files(folder)}


@pytest.mark.parametrize("name", ["../../escape", "/tmp/escape", "a/b"])
def test_figure_refuses_a_name_or_preset_that_is_not_registered(
    tmp_path: Path, run_cli, name: str
) -> None:
    out = tmp_path / "out"
    code, _, err = run_cli("figure", name, "--out", str(out))
    assert code == 2 and err.count("\n") == 1 and "figure" in err
    code, _, err = run_cli("figure", "fedadamom-escape", "--preset", name, "--out", str(out))
    assert code == 2 and err.count("\n") == 1 and "preset" in err
    assert not _files(tmp_path)


@pytest.mark.parametrize("name", ["../../escape", "/etc", "a/../../b"])
def test_plot_reads_run_folders_only_and_writes_only_its_out(
    tmp_path: Path, run_cli, name: str
) -> None:
    code, _, err = run_cli(
        "plot", name, "--root", str(tmp_path / "r"), "--out", str(tmp_path / "p.png")
    )
    assert code == 2 and err.count("\n") == 1
    assert "no run " in err or "not a run folder" in err
    assert not _files(tmp_path)


def test_child_folder_is_the_one_way_from_a_name_to_a_path(tmp_path: Path) -> None:
    for name in _evil_names(tmp_path):
        path = child_folder(tmp_path / "out", name)
        assert path.parent == tmp_path / "out" and path.name == safe_name(name)
        assert "/" not in path.name and "\\" not in path.name and path.name not in ("", ".", "..")


def test_a_link_in_out_that_leads_outside_is_refused_in_one_line(tmp_path: Path, run_cli) -> None:
    config = _table(tmp_path, "t")
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (out / "t").symlink_to(tmp_path / "elsewhere")
    code, _, err = run_cli("run", str(config), "--out", str(out))
    assert code == 2 and err.count("\n") == 1 and "resolves outside" in err, err
    assert not any((tmp_path / "elsewhere").iterdir())
