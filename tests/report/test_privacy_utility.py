"""Issue 47, point 1: the privacy-utility figure (a metric against epsilon per private row, mean
with its 95 % interval over seeds, the non-private rows as reference lines) from one table
folder or several that share a setting, and `fedbench plot TABLE_FOLDER...`."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from PIL import Image

from fedbench.errors import FedbenchError
from fedbench.report import build_report
from fedbench.report.privacy_plot import plot_privacy_utility
from fedbench.report.privacy_utility import build, caption
from fedbench.report.significance import mean_ci
from fedbench.report.sources import Source
from fedbench.runner.sweep import write_plan
from fedbench.runner.table_config import expand, parse_table_config
from tests.conftest import tiny_table_data
from tests.report.helpers import fake_run

ACCOUNTING = {"accounting": "exact", "why": "Poisson batch sampling at q = B/n_i"}
#: Final accuracy per (row, target epsilon) and seed; the epsilon each seed spent.
ACC = {
    ("DP-A", 2.0): [40.0, 42.0, 47.0],
    ("DP-A", 8.0): [60.0, 61.0, 65.0],
    ("DP-B", 2.0): [30.0, 31.0, 35.0],
    ("DP-B", 8.0): [50.0, 55.0, 57.0],
}
SPENT = {2.0: [1.99, 2.0, 1.98], 8.0: [7.99, 7.97, 7.98]}
PLAIN = [90.0, 91.0, 93.0]


def _table(name: str, private: bool, lr: float = 0.1) -> dict[str, Any]:
    data = tiny_table_data()
    data.pop("paper")
    data["table"] = name
    data["seeds"] = [0, 1, 2]
    data["metrics"] = ["test_acc"]
    if private:
        data["base"]["privacy"] = {"target_epsilon": 2.0, "clip": 1.0, "delta": 1.0e-5}
        data["grid"] = {"privacy.target_epsilon": [2.0, 8.0]}
        data["methods"] = {
            "DP-A": {"algorithm": {"name": "dp_fedavg", "lr": lr}},
            "DP-B": {"algorithm": {"name": "dp_fedavg", "lr": 0.01}},
        }
    else:
        data["grid"] = {}
        data["methods"] = {"Plain": {"algorithm": {"name": "fedavg", "lr": 0.1}}}
    return data


def _folder(out: Path, data: dict[str, Any], overrides: list[str] | None = None) -> Path:
    plan = expand(parse_table_config(data), overrides=overrides or [])
    for run in plan.runs:
        folder = out / "runs" / run.run_id
        if run.cfg.privacy is None:
            fake_run(folder, run.cfg, PLAIN[run.seed])
            continue
        target = run.setting["privacy.target_epsilon"]
        fake_run(folder, run.cfg, ACC[(run.method, target)][run.seed])
        summary = json.loads((folder / "summary.json").read_text())
        summary |= {
            "epsilon": SPENT[target][run.seed],
            "delta": 1e-5,
            "noise_multiplier": 1.0,
            "privacy_accounting": ACCOUNTING,
        }
        (folder / "summary.json").write_text(json.dumps(summary))
    write_plan(plan, out / plan.name)
    return out / plan.name


def test_points_are_the_cells_worst_epsilon_and_mean_with_its_interval(tmp_path: Path) -> None:
    private = _folder(tmp_path, _table("dp", True))
    plain = _folder(tmp_path, _table("plain", False))
    sources = [Source.read(f, "test_acc") for f in (private, plain)]
    figure = build(sources, "test_acc")
    assert figure.rows == ["DP-A", "DP-B"] and figure.panels == [""]
    by_cell = {(p.row, round(p.epsilon)): p for p in figure.points}
    for (row, target), values in ACC.items():
        point = by_cell[(row, round(target))]
        assert point.epsilon == max(SPENT[target])  # the worst seed's: what the cell guarantees
        assert point.mean == pytest.approx(sum(values) / 3, rel=1e-15)
        assert (point.low, point.high) == pytest.approx(mean_ci(values), rel=1e-12)
        assert point.n == 3
    [reference] = figure.references
    assert reference.row == "Plain" and reference.mean == pytest.approx(sum(PLAIN) / 3)
    assert math.isnan(reference.epsilon)
    assert figure.deltas == ["1e-05"]
    assert figure.accounting == ["exact (Poisson batch sampling at q = B/n_i)"]
    text = caption(figure, sources)
    assert "mean over 3 seeds with its 95% confidence interval" in text
    assert "Dashed: Plain without differential privacy" in text
    assert "δ = 1e-05; accounting: exact (Poisson batch sampling at q = B/n_i)." in text
    assert "What ran (dp): digits, model LogReg" in text and "What ran (plain):" in text


def test_plot_writes_png_pdf_caption_and_csv_at_a_column_width(tmp_path: Path) -> None:
    private = _folder(tmp_path, _table("dp", True))
    plain = _folder(tmp_path, _table("plain", False))
    png = tmp_path / "fig" / "pu.png"
    files = plot_privacy_utility([private, plain], "test_acc", png, "column")
    assert [f.name for f in files] == ["pu.png", "pu.pdf", "pu.caption.txt", "pu.csv"]
    with Image.open(png) as image:
        assert image.size[0] == round(3.3 * 300)  # 3.3 in at 300 dpi, no cropping
        assert "accounting: exact" in image.text["Description"]  # the caption, as metadata
    assert (tmp_path / "fig" / "pu.pdf").read_bytes().startswith(b"%PDF")
    assert "δ = 1e-05" in (tmp_path / "fig" / "pu.caption.txt").read_text()
    points = pd.read_csv(tmp_path / "fig" / "pu.csv")
    assert list(points["row"]) == ["DP-A", "DP-A", "DP-B", "DP-B", "Plain"]
    assert list(points["private"]) == [True] * 4 + [False]
    page = tmp_path / "fig" / "wide.png"
    plot_privacy_utility([private], "test_acc", page, "page")
    with Image.open(page) as image:
        assert image.size[0] == round(6.9 * 300)


def test_folders_of_different_settings_are_refused(tmp_path: Path) -> None:
    private = _folder(tmp_path, _table("dp", True))
    plain = _folder(tmp_path / "other", _table("plain", False), overrides=["fl.rounds=5"])
    sources = [Source.read(f, "test_acc") for f in (private, plain)]
    with pytest.raises(FedbenchError, match=r"do not share a setting: fl.rounds is 3 .* 5"):
        plot_privacy_utility([private, plain], "test_acc", tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
    assert sources[1].constant()["fl.rounds"] == 5


def test_a_row_of_two_folders_is_labelled_by_what_tells_them_apart(tmp_path: Path) -> None:
    first = _folder(tmp_path / "a", _table("dp", True))
    second = _folder(tmp_path / "b", _table("dp", True, lr=0.05))
    figure = build([Source.read(f, "test_acc") for f in (first, second)], "test_acc")
    # DP-A ran lr 0.1 in one and 0.05 in the other; DP-B ran the same: named by its folder.
    assert figure.rows == [
        "DP-A, lr=0.1",
        f"DP-B ({first})",
        "DP-A, lr=0.05",
        f"DP-B ({second})",
    ]


def test_without_private_rows_it_says_what_to_give(tmp_path: Path) -> None:
    plain = _folder(tmp_path, _table("plain", False))
    with pytest.raises(FedbenchError, match="needs rows with differential privacy"):
        build([Source.read(plain, "test_acc")], "test_acc")


def test_cli_plot_of_table_folders_and_its_one_line_errors(tmp_path: Path, run_cli) -> None:
    private = _folder(tmp_path, _table("dp", True))
    plain = _folder(tmp_path, _table("plain", False))
    out = tmp_path / "pu.png"
    code, stdout, err = run_cli("plot", str(private), str(plain), "--out", str(out))
    assert code == 0, err
    assert f"wrote {out}, {out.with_suffix('.pdf')}" in stdout
    run = next((tmp_path / "runs").iterdir())
    code, _, err = run_cli("plot", str(private), str(run), "--out", str(tmp_path / "y.png"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "not a table folder" in err and not (tmp_path / "y.png").exists()
    code, _, err = run_cli("plot", str(private), "--width", "wide", "--out", str(out))
    assert code == 2 and "--width 'wide'" in err


def test_a_report_with_two_budgets_draws_the_figure(tmp_path: Path) -> None:
    private = _folder(tmp_path, _table("dp", True))
    report = build_report(private)
    assert private / "privacy_utility.png" in report.files
    assert (private / "privacy_utility.caption.txt").is_file()
    plain = _folder(tmp_path, _table("plain", False))
    assert not any("privacy_utility" in f.name for f in build_report(plain).files)


def test_a_reference_sits_in_the_panels_of_the_setting_it_ran(tmp_path: Path) -> None:
    """Grid keys other than privacy make panels; a non-private table without a grid, at
    Dir-0.6, is the reference of the Dir-0.6 panel only."""
    data = _table("dp", True)
    data["grid"] = {"partition.alpha": [0.6, 0.1], "privacy.target_epsilon": [2.0, 8.0]}
    private = _folder(tmp_path, data)
    plain = _folder(tmp_path, _table("plain", False))
    figure = build([Source.read(f, "test_acc") for f in (private, plain)], "test_acc")
    assert figure.panels == ["Dir-0.6", "Dir-0.1"]
    assert [r.shown_in for r in figure.references] == [["Dir-0.6"]]
    files = plot_privacy_utility([private, plain], "test_acc", tmp_path / "p.png", "page")
    assert "Dir-0.6" in pd.read_csv(files[-1])["panel"].tolist()
    elsewhere = _folder(tmp_path / "o", _table("plain", False), overrides=["partition.alpha=0.3"])
    with pytest.raises(FedbenchError, match="where no private row ran"):
        build([Source.read(f, "test_acc") for f in (private, elsewhere)], "test_acc")
