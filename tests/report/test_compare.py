"""`fedbench compare`: rows of table folders against each other, t-tests over seeds (paired
where the sides ran the same seeds, else Welch's), Holm-corrected over the comparison."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest
from scipy import stats

from fedbench.errors import FedbenchError
from fedbench.report.compare import compare
from fedbench.runner.sweep import write_plan
from fedbench.runner.table_config import expand, parse_table_config
from tests.conftest import tiny_table_data
from tests.report.helpers import fake_run
from tests.report.test_privacy_report import _dp_folder

ACC = {
    "Local SGD": [50.0, 54.0, 61.0],
    "FedAdamW": [70.0, 71.5, 80.0],
    "Local SGD momentum": [1.0, 2.0, 3.0],
}


def _folder(
    tmp_path: Path, name: str, acc: dict[str, list[float | None]], seeds: list[int] | None = None
) -> Path:
    data = tiny_table_data()
    data["table"] = name
    data["seeds"] = seeds or [0, 1, 2]
    data["grid"] = {"partition.alpha": [0.6, 0.1]}
    data["methods"]["Local SGD momentum"] = {"algorithm": {"name": "fedcm"}}
    plan = expand(parse_table_config(data))
    for run in plan.runs:
        value = acc[run.method][data["seeds"].index(run.seed)]  # None: a failed seed
        status = "completed" if value is not None else "failed"
        fake_run(tmp_path / "runs" / run.run_id, run.cfg, value or 0.0, status)
    write_plan(plan, tmp_path / plan.name)
    return tmp_path / plan.name


def _welch_by_hand(a: list[float], b: list[float]) -> float:
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    t = (statistics.mean(a) - statistics.mean(b)) / math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    return 2 * stats.t.sf(abs(t), dof)


def test_rows_of_one_folder_and_of_two_folders(tmp_path: Path, run_cli) -> None:
    one = _folder(tmp_path, "first", ACC)
    found = compare([f"{one}:fedadam", f"{one}:Local SGD"])  # a unique prefix, any case
    assert len(found) == 2  # the tiny table's two columns
    # The rows ran the same seeds: a paired t-test, by hand (d = 20, 17.5, 19).
    d = [a - b for a, b in zip(ACC["FedAdamW"], ACC["Local SGD"], strict=True)]
    t = statistics.mean(d) / (statistics.stdev(d) / math.sqrt(3))
    paired = 2 * stats.t.sf(abs(t), 2)
    for c in found:
        assert (c.a.row, c.b.row) == ("FedAdamW", "Local SGD")
        assert c.a_values == ACC["FedAdamW"] and c.b_values == ACC["Local SGD"]
        assert c.test.kind == "paired" and c.p == pytest.approx(paired, rel=1e-12)
        # Holm over the two tests: 2p for the smaller, max(2p, p) for the other (equal here).
        assert c.p_holm == pytest.approx(2 * paired, rel=1e-12) and c.verdict == ">"
        half = stats.t.ppf(0.975, 2) * statistics.stdev(d) / math.sqrt(3)
        assert c.test.ci == pytest.approx((statistics.mean(d) - half, statistics.mean(d) + half))
    # The same row in another folder at other seeds: Welch's test, within noise of the first.
    other = _folder(tmp_path / "b", "second", {**ACC, "Local SGD": [52.0, 55.0, 58.0]}, [3, 4, 5])
    [c, *_] = compare([f"{one}:Local SGD", f"{other}:Local SGD"])
    assert c.test.kind == "welch"
    assert c.p == pytest.approx(_welch_by_hand(ACC["Local SGD"], [52.0, 55.0, 58.0]), rel=1e-9)
    assert c.verdict == "tie"
    code, out, err = run_cli("compare", f"{one}:FedAdamW", f"{one}:Local SGD")
    assert code == 0, err
    assert "first:FedAdamW" in out and "73.83 ± 5.39 (n=3)" in out and ">" in out
    assert "tests: paired t-test over seeds (2)" in out
    assert "Holm-corrected over the 2 tests of this comparison" in out


def test_holm_can_turn_a_raw_difference_into_a_tie(tmp_path: Path) -> None:
    """Each p below 0.05 alone, but not after Holm's correction over the comparison's tests."""
    acc = {**ACC, "Local SGD": [50.0, 52.0, 57.0], "FedAdamW": [51.5, 54.5, 60.0]}
    folder = _folder(tmp_path, "t", acc)
    found = compare([f"{folder}:FedAdamW", f"{folder}:Local SGD"])
    raw = stats.ttest_rel(acc["FedAdamW"], acc["Local SGD"]).pvalue
    assert raw < 0.05 <= 2 * raw
    assert [c.p_holm for c in found] == pytest.approx([2 * raw, 2 * raw], rel=1e-12)
    assert [c.verdict for c in found] == ["tie", "tie"]


def test_fewer_than_three_seeds_are_not_tested(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "t", {**ACC, "Local SGD": [50.0, 54.0, None]})
    [c, *_] = compare([f"{folder}:FedAdamW", f"{folder}:Local SGD"])
    assert c.b_values == [50.0, 54.0] and c.verdict.startswith("not tested")


@pytest.mark.parametrize(
    ("sides", "message"),
    [
        (["{f}:Fed"], "at least two sides"),
        (["{f}:local", "{f}:FedAdamW"], "matches several rows"),
        (["{f}:FedAdamX", "{f}:Local SGD"], "did you mean 'FedAdamW'"),
        (["{f}", "{f}:Local SGD"], "FOLDER:ROW"),
    ],
)
def test_user_errors_are_one_line(tmp_path: Path, sides: list[str], message: str, run_cli) -> None:
    folder = _folder(tmp_path, "t", ACC)
    with pytest.raises(FedbenchError, match=message):
        compare([s.format(f=folder) for s in sides])
    code, _, err = run_cli("compare", *[s.format(f=folder) for s in sides])
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_no_p_value_is_printed_where_no_test_was_made(tmp_path: Path, run_cli) -> None:
    folder = _folder(tmp_path, "t", {**ACC, "Local SGD": [50.0, None, None]})
    code, out, err = run_cli("compare", f"{folder}:FedAdamW", f"{folder}:Local SGD")
    assert code == 0, err
    row = next(line for line in out.splitlines() if "not tested (fewer than 3 seeds)" in line)
    assert "nan" not in out and "│ - " in row
    assert "50.00 (n=1)" in row and "± 0.00" not in row  # one seed: no spread to print


def test_scipy_warning_is_one_line_not_a_traceback_warning(tmp_path: Path, run_cli) -> None:
    nearly = [71.66666666666667, 71.66666666666667, 71.66666666666668]
    folder = _folder(tmp_path, "t", {**ACC, "FedAdamW": [71.66666666666667] * 3})
    other = _folder(tmp_path / "b", "u", {**ACC, "Local SGD": nearly}, [3, 4, 5])  # Welch
    [c, *_] = compare([f"{folder}:FedAdamW", f"{other}:Local SGD"])
    assert c.warning is not None and "Precision loss" in c.warning
    code, out, err = run_cli("compare", f"{folder}:FedAdamW", f"{other}:Local SGD")
    assert code == 0 and "RuntimeWarning" not in out + err
    notes = [line for line in out.splitlines() if line.startswith("note: scipy warned")]
    assert len(notes) == 1 and "2 of 2 tests" in notes[0]


def test_a_row_without_runs_says_so(tmp_path: Path, run_cli) -> None:
    data = tiny_table_data()
    data["seeds"] = [0]
    plan = expand(parse_table_config(data), methods=["FedAdamW"])
    for run in plan.runs:
        fake_run(tmp_path / "runs" / run.run_id, run.cfg, 70.0)
    write_plan(plan, tmp_path / plan.name)
    folder = tmp_path / plan.name
    code, _, err = run_cli("compare", f"{folder}:FedAdamW", f"{folder}:Local SGD")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert f"no runs for row 'Local SGD' in {folder}" in err and "share no column" not in err
    failed = _folder(tmp_path / "f", "t", {**ACC, "Local SGD": [None, None, None]})
    with pytest.raises(FedbenchError, match=r"no completed runs for row 'Local SGD' .*6 failed"):
        compare([f"{failed}:FedAdamW", f"{failed}:Local SGD"])


def test_columns_are_labelled_by_what_ran_with_the_preset(tmp_path: Path, run_cli) -> None:
    data = tiny_table_data()
    data["grid"] = {"model.name": ["resnet18"]}
    data["seeds"] = [0]
    data["presets"] = {"quick": {"model.name": {"resnet18": "logreg"}, "fl.rounds": 2}}
    plan = expand(parse_table_config(data), preset="quick")
    for run in plan.runs:
        fake_run(tmp_path / "runs" / run.run_id, run.cfg, 70.0)
    write_plan(plan, tmp_path / plan.name)
    folder = tmp_path / plan.name
    [c] = compare([f"{folder}:FedAdamW", f"{folder}:Local SGD"])
    assert c.column_label == "LogReg for ResNet-18"
    code, out, _ = run_cli("compare", f"{folder}:FedAdamW", f"{folder}:Local SGD")
    assert code == 0 and "LogReg for ResNet-18" in out and "model.name=resnet18" not in out
    assert "what ran in tiny-quick:FedAdamW and tiny-quick:Local SGD: preset quick; digits" in out


def test_an_exact_comparison_is_no_member_of_the_holm_family(tmp_path: Path, run_cli) -> None:
    """Rows one point apart at every seed have no noise: p is 0 as it is, and the family Holm
    corrects is the 4 real tests, not 6."""
    acc = {**ACC, "Local SGD momentum": [49.0, 53.0, 60.0]}  # Local SGD - 1 at every seed
    folder = _folder(tmp_path, "t", acc)
    sides = [f"{folder}:FedAdamW", f"{folder}:Local SGD", f"{folder}:Local SGD momentum"]
    found = compare(sides)
    exact = [c for c in found if c.test.noiseless]
    assert [(c.a.row, c.b.row, c.p, c.p_holm, c.verdict) for c in exact] == [
        ("Local SGD", "Local SGD momentum", 0.0, 0.0, ">")
    ] * 2
    tests = [c for c in found if not c.test.noiseless]
    raw = [c.p for c in tests]
    assert len(raw) == 4
    order = sorted(range(4), key=raw.__getitem__)
    expected, running = [0.0] * 4, 0.0
    for rank, i in enumerate(order):  # Holm by hand over the 4 tests
        running = max(running, min(1.0, (4 - rank) * raw[i]))
        expected[i] = running
    assert [c.p_holm for c in tests] == pytest.approx(expected, rel=1e-12)
    code, out, err = run_cli("compare", *sides)
    assert code == 0, err
    assert "over the 4 tests of this comparison" in out and "exact: 2 comparisons" in out


def test_two_sweeps_of_one_table_are_named_by_folder_and_their_differences(
    tmp_path: Path, run_cli
) -> None:
    """Issue 47: two --out folders of one table both read `t:Local SGD`; the sides are now named
    by as much of their path as tells them apart, and the settings that differ are listed."""
    data = tiny_table_data()
    data["table"] = "t"
    data["seeds"] = [0, 1, 2]
    folders = []
    for out, overrides in (("first", []), ("second", ["algorithm.lr=0.05", "fl.rounds=4"])):
        plan = expand(parse_table_config(data), methods=["Local SGD"], overrides=overrides)
        for run in plan.runs:
            fake_run(tmp_path / out / "runs" / run.run_id, run.cfg, 60.0 + run.seed)
        write_plan(plan, tmp_path / out / plan.name)
        folders.append(tmp_path / out / plan.name)
    [c] = compare([f"{folders[0]}:Local SGD", f"{folders[1]}:Local SGD"])
    assert (c.a.label, c.b.label) == ("first/t:Local SGD", "second/t:Local SGD")
    code, out, err = run_cli("compare", f"{folders[0]}:Local SGD", f"{folders[1]}:Local SGD")
    assert code == 0, err
    assert (
        "first/t:Local SGD (A) vs second/t:Local SGD (B) differ in: algorithm.lr 0.1 vs 0.05; "
        "fl.rounds 3 vs 4; --set none vs algorithm.lr=0.05, fl.rounds=4" in out
    )
    # Rows of one folder keep the folder's name alone, and the row's own settings differ.
    one = _folder(tmp_path / "c", "u", ACC)
    code, out, err = run_cli("compare", f"{one}:FedAdamW", f"{one}:Local SGD")
    assert (
        "u:FedAdamW (A) vs u:Local SGD (B) differ in: algorithm.lr 0.01 vs 0.1; algorithm.name "
        "fedadamw vs fedavg; algorithm.weight_decay 0.01 vs 0.001" in out
    )  # FedAdamW's own fields (alpha, beta2, ...) are not differences: fedavg has none
    private = _dp_folder(tmp_path / "dp")
    code, out, err = run_cli("compare", f"{private}:DP-FedAvg", f"{private}:Local SGD")
    assert code == 0, err
    assert (
        "DP-FedAvg (A) vs tiny:Local SGD (B) differ in: algorithm.name dp_fedavg vs fedavg" in out
    )
    assert out.rstrip().endswith("; privacy set vs unset")


def test_a_metric_no_run_of_a_row_recorded_is_one_line(tmp_path: Path, run_cli) -> None:
    # Main: ZeroDivisionError in _mean (epsilon on a table trained without privacy).
    folder = _folder(tmp_path, "t", ACC)
    with pytest.raises(FedbenchError, match=r"no completed run of row 'FedAdamW' recorded"):
        compare([f"{folder}:FedAdamW", f"{folder}:Local SGD"], "epsilon")
    code, out, err = run_cli(
        "compare", f"{folder}:FedAdamW", f"{folder}:Local SGD", "--metric", "epsilon"
    )
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "only private runs record epsilon" in err and "--metric test_acc" in err
