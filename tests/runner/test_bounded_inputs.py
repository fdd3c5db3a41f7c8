"""Huge numbers on the command line are bounded or refused in one line, never a list that long."""

from __future__ import annotations

from pathlib import Path

from fedbench.runner.launcher import local_slots


def test_a_billion_workers_run_as_many_workers_as_runs(run_cli, tiny_table_path, tmp_path) -> None:
    out = tmp_path / "out"
    code, _, err = run_cli(
        "run", str(tiny_table_path), "--preset", "quick", "--methods", "FedAdamW",
        "--seeds", "1", "--workers", "1000000000", "--out", str(out),
    )  # fmt: skip
    assert code == 0, err
    assert (out / "tiny-quick" / "summary.csv").is_file()


def test_local_slots_keep_their_order_when_capped() -> None:
    assert local_slots(3, 2, ["0", "1"]) == ["0", "1", "0"]
    assert local_slots(None, 2, ["0"]) == ["0", "0"]
    assert local_slots(2, 1, []) == [None, None]


def test_tune_seed_out_of_range_is_one_line(run_cli, tiny_table_path, tmp_path: Path) -> None:
    for seed in ("-1", str(2**32), "100000000000000000000"):
        code, _, err = run_cli(
            "tune", str(tiny_table_path), "--grid", "algorithm.lr=0.1", "--seed", seed,
            "--out", str(tmp_path / "out"),
        )  # fmt: skip
        assert code == 2 and err.count("\n") == 1 and "--seed" in err, err
    assert not (tmp_path / "out").exists()
