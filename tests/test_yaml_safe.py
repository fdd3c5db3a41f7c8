"""Every YAML fedbench reads goes through fedbench.yaml_safe: a few hundred bytes of nested
aliases (a "billion laughs") fail in one line, fast and without allocating what they stand for."""

from __future__ import annotations

import os
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml

from fedbench.config import read_yaml
from fedbench.engine.run_folder import run_status
from fedbench.errors import FedbenchError
from fedbench.yaml_safe import MAX_YAML_BYTES, MAX_YAML_VALUES, load_yaml


def bomb(levels: int = 9, width: int = 10, indent: str = "") -> str:
    """`levels` nested levels of `width` aliases: width**levels values in ~450 bytes."""
    lines = [f"{indent}a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"{indent}a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_the_bomb_is_small_and_fails_fast_without_allocating() -> None:
    text = "model:\n  lora:\n" + bomb(indent="    ")
    assert len(text) < 500
    tracemalloc.start()
    start = time.perf_counter()
    with pytest.raises(yaml.YAMLError, match="aliases expand to more than 1,000,000 values"):
        load_yaml(text)
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 1.0 and peak < 5_000_000, (elapsed, peak)


def test_train_refuses_a_bomb_in_one_line(run_cli, tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text("model:\n  lora:\n" + bomb(indent="    "))
    code, _, err = run_cli("train", str(path), "--out", str(tmp_path / "out"))
    assert code == 2 and err.count("\n") == 1, err
    assert f"malformed YAML in {path} at line 8" in err and "aliases expand" in err
    assert not (tmp_path / "out").exists()


def test_run_and_tuned_files_refuse_a_bomb(run_cli, tmp_path: Path, tiny_table_path) -> None:
    table = tmp_path / "bomb-table.yaml"
    table.write_text(tiny_table_path.read_text() + bomb())
    code, _, err = run_cli("run", str(table), "--dry-run", "--out", str(tmp_path / "out"))
    assert code == 2 and err.count("\n") == 1 and "aliases expand" in err, err
    tuned = tmp_path / "tuned.yaml"
    tuned.write_text("table: tiny\nrows:\n" + bomb(indent="  "))
    code, _, err = run_cli("run", str(tiny_table_path), "--tuned", str(tuned), "--dry-run")
    assert code == 2 and err.count("\n") == 1 and "aliases expand" in err, err


def test_a_bomb_in_a_set_value_is_a_string_the_field_refuses(run_cli) -> None:
    value = "{" + bomb(levels=7).replace("\n", ", ").rstrip(", ") + "}"
    code, _, err = run_cli("train", "--set", f"model.lora={value}", "--print-config")
    assert code == 2 and err.count("\n") == 1 and "'model.lora'" in err, err


def test_a_bomb_in_a_run_folder_config_reads_as_no_config(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(bomb())
    assert run_status(tmp_path).rounds is None


def test_recursive_and_deeply_nested_documents_are_errors(tmp_path: Path) -> None:
    with pytest.raises(yaml.YAMLError, match="contains it"):
        load_yaml("a: &a [1, *a]\n")
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(FedbenchError, match="nested too deeply"):
        read_yaml(deep)


def test_ordinary_aliases_and_large_documents_still_load() -> None:
    text = "base: &b {lr: 0.1, weight_decay: 0.001}\nA: *b\nB: {<<: *b, lr: 0.2}\n"
    assert load_yaml(text) == {
        "base": {"lr": 0.1, "weight_decay": 0.001},
        "A": {"lr": 0.1, "weight_decay": 0.001},
        "B": {"lr": 0.2, "weight_decay": 0.001},
    }
    assert load_yaml(bomb(levels=5)) is not None  # 10**5 values: under the limit
    assert 10**5 < MAX_YAML_VALUES < 10**6 + 1


def test_duplicate_keys_are_still_refused() -> None:
    with pytest.raises(yaml.YAMLError, match="duplicate key 'a'"):
        load_yaml("a: 1\na: 2\n")


def test_a_config_past_the_size_bound_is_refused_before_it_is_parsed(
    run_cli, tmp_path: Path, tiny_table_path, monkeypatch
) -> None:
    """A 50 MB table config (25 million list items under an unknown key) grew `run --dry-run`
    past 3 GB: a file past MAX_YAML_BYTES is one line, and PyYAML never sees it."""
    from fedbench import yaml_safe

    def never(text: str) -> None:
        raise AssertionError("parsed")

    table = tmp_path / "big-table.yaml"
    table.write_text(tiny_table_path.read_text() + "junk:\n" + "- 1\n" * (2**20 // 4))
    monkeypatch.setattr(yaml_safe.yaml, "load", never)
    code, _, err = run_cli("run", str(table), "--dry-run", "--out", str(tmp_path / "out"))
    assert code == 2 and err.count("\n") == 1, err
    assert err == (
        f"error: {table}: is {table.stat().st_size:,} bytes, more than the 1 MiB such a file may "
        "hold; give the path of a "
        "YAML file (of at most 1 MiB)\n"
    )
    fifo = tmp_path / "run.yaml"  # a FIFO in place of a config: refused, not waited on
    os.mkfifo(fifo)
    code, _, err = run_cli("train", str(fifo), "--print-config")
    assert code == 2 and err.count("\n") == 1, err
    assert "run.yaml: is a named pipe (FIFO), not a regular file; give the path" in err


def test_run_folder_configs_and_tuned_files_are_bounded_too(tmp_path: Path) -> None:
    junk = "# " + "x" * MAX_YAML_BYTES + "\n"
    (tmp_path / "config.yaml").write_text("fl: {rounds: 3}\n")
    assert run_status(tmp_path).rounds == 3
    (tmp_path / "config.yaml").write_text("fl: {rounds: 3}\n" + junk)
    assert run_status(tmp_path).rounds is None
    (tmp_path / "tuned.yaml").write_text("table: tiny\nrows: {}\n" + junk)
    with pytest.raises(
        FedbenchError, match=r"tuned\.yaml: is 1,048,6\d\d bytes, more than the 1 MiB"
    ):
        read_yaml(tmp_path / "tuned.yaml")
