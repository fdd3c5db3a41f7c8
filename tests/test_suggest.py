"""Issue 13 item 6: every unknown name offers the closest known names; duplicate YAML keys fail."""

import pytest

from fedbench.algorithms.registry import ALGORITHMS
from fedbench.suggest import MAX_LISTED, closest, did_you_mean, unknown

DEMO = "configs/demo.yaml"


def test_closest_is_case_insensitive_and_prefers_the_exact_case_slip() -> None:
    assert closest("FedAdamw", ["fedadamw", "fedadam", "dp_fedadamw"]) == ["fedadamw"]
    assert closest("fminst", ["fmnist", "digits", "cifar10"]) == ["fmnist"]
    assert closest("planet", ["fmnist", "digits"]) == []
    assert did_you_mean("planet", ["fmnist"]) == ""
    assert unknown("model", "resnet", ["resnet18", "cnn"]) == (
        "unknown model 'resnet'; did you mean 'resnet18'? known: cnn, resnet18"
    )


def test_a_long_list_of_names_gives_the_closest_and_the_list_command(run_cli) -> None:
    """The unknown-algorithm error listed all 43 algorithms on one ~600-character line."""
    line = _error(run_cli, "train", "--set", "algorithm.name=fedadamx")
    assert line == (
        "error: unknown algorithm 'fedadamx'; did you mean 'fedadam' or 'fedadamw' or "
        f"'fedadamom'? see all {len(list(ALGORITHMS))}: fedbench list algorithms"
    )
    assert len(line) < 160
    few = [f"m{i}" for i in range(MAX_LISTED)]
    assert unknown("model", "m", few).endswith("known: " + ", ".join(sorted(few)))


def _error(run_cli, *args: str) -> str:
    code, _, err = run_cli(*args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_switching_algorithm_names_the_field_of_the_previous_one(run_cli, tmp_path) -> None:
    """The bug: `--set algorithm.name=fedavg` on demo.yaml said 'check its spelling' of alpha."""
    line = _error(run_cli, "train", DEMO, "--set", "algorithm.name=fedavg", "--out", str(tmp_path))
    assert (
        "unknown config field 'algorithm.alpha' for fedavg: it belongs to the previous "
        "algorithm fedadamw; remove it from the config." in line
    )
    assert "fedavg's fields: lr, lr_schedule" in line and "weight_decay" in line
    assert "spelling" not in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--set", "algorithm.name=FedAdamw"], "did you mean 'fedadamw'?"),
        (["--set", "data.name=fminst"], "unknown dataset 'fminst'; did you mean 'fmnist'"),
        (["--set", "model.name=resnet"], "did you mean 'resnet18'?"),
        (["--set", "fl.round=3"], "'fl.round'; did you mean 'rounds'? known here: rounds,"),
        (["--set", "algorithm.alpah=1"], "'algorithm.alpah' for fedadamw; did you mean 'alpha'?"),
        (
            ["--set", "algorithm.mu=0.1"],
            "'algorithm.mu' for fedadamw: it is a field of dp_fedprox, fedprox",
        ),
        (["--set", "optim.lr=1"], "unknown config field 'optim'; known here: seed, data,"),
    ],
)
def test_unknown_names_in_train_offer_the_closest(run_cli, tmp_path, args, expected) -> None:
    assert expected in _error(run_cli, "train", *args, "--out", str(tmp_path))


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["run", "alpha"],
            "'alpha' is an ablation, not a table; run it with `fedbench ablate alpha`",
        ),
        (["ablate", "table1"], "'table1' is a table, not an ablation; run it with `fedbench run"),
        (["run", "tabel1"], "no table named 'tabel1'; did you mean 'table1'"),
        (["run", "table1", "--preset", "quik"], "no preset 'quik'; did you mean 'quick'?"),
        (["run", "table1", "--methods", "fedadamw"], "no row 'fedadamw'; did you mean 'FedAdamW'?"),
        (["list", "algoritms"], "did you mean 'algorithms'?"),
    ],
)
def test_unknown_tables_presets_rows(run_cli, tmp_path, args, expected) -> None:
    assert expected in _error(
        run_cli, *args, *(["--out", str(tmp_path)] if args[0] != "list" else [])
    )
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            "algorithm:\n  name: fedadamw\n  lr: 0.1\n  lr: 0.2\n",
            "line 4, column 3: duplicate key 'lr'",
        ),
        ("fl: {rounds: 3}\nfl: {rounds: 4}\n", "line 2, column 1: duplicate key 'fl'"),
    ],
)
def test_duplicate_yaml_key_is_an_error(run_cli, tmp_path, text, where) -> None:
    """The bug: PyYAML silently kept the last of two equal keys."""
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    assert where in _error(run_cli, "train", str(path), "--out", str(tmp_path))
    assert not (tmp_path / "runs").exists()


def test_unknown_table_config_key_offers_the_closest(run_cli, tmp_path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("table: t\nmethods: {A: {}}\nmetircs: [test_acc]\n")
    line = _error(run_cli, "run", str(path), "--dry-run")
    assert "unknown config field 'metircs'; did you mean 'metrics'?" in line
