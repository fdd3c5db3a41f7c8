"""Issue 47, point 2: the report's figures keep what ran out of the plot area (a caption file and
the files' metadata hold it), name only the rows in their legends, label ticks plainly, and are
drawn at a column's or the page's width with fonts at LaTeX's sizes (fedbench.report.style)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.text import Text
from PIL import Image

from fedbench.report import build_report, style
from fedbench.report.plots import draw_curves
from tests.report.test_privacy_report import _dp_folder


def _labels(ax: Axes, axis: str) -> list[str]:
    ax.figure.canvas.draw()
    ticks = ax.get_yticklabels(which="both") if axis == "y" else ax.get_xticklabels()
    return [t.get_text() for t in ticks if t.get_text()]


def test_plain_ticks_on_a_log_axis_read_as_numbers() -> None:
    """The bug: a train-loss axis from 0.5 to 2.5 read '2×10⁰', '6×10⁻¹'."""
    with style.paper_style() as plt:
        fig, ax = plt.subplots()
        ax.plot([0, 1, 2], [2.4, 1.1, 0.55])
        ax.set_yscale("log")
        style.plain_ticks(ax, "y")
        labels = _labels(ax, "y")
        plt.close(fig)
    assert "1" in labels and "2" in labels and "0.6" in labels
    assert not any("×" in t or "e-" in t or "$" in t or "^" in t for t in labels)
    assert style.plain_number(1e-5) == "1e-05" and style.plain_number(2.0) == "2"


def test_the_style_is_latex_sized() -> None:
    assert style.WIDTHS == {"column": 3.3, "page": 6.9}
    assert (style.RC["axes.labelsize"], style.RC["legend.fontsize"]) == (9.0, 8.0)


def test_curves_have_no_configuration_text_and_a_legend_of_rows(tmp_path: Path) -> None:
    folder = _dp_folder(tmp_path)
    report = build_report(folder)
    names = [f.name for f in report.files]
    assert names[4:7] == ["curves.png", "curves.pdf", "curves.caption.txt"]
    caption = (folder / "curves.caption.txt").read_text()
    assert "What ran: digits, model LogReg" in caption and "3 seeds (0-2)" in caption
    assert "Privacy: DP-FedAvg (ε 3.50, δ 1e-05, approximate)." in caption
    with Image.open(folder / "curves.png") as image:
        assert image.size[0] == round(3.3 * 300)  # one setting: a column's width
        assert image.text["Description"] == caption.split("\n\n", 1)[1].strip()
    # The figure itself: the legend names the rows only, no suptitle, no what-ran text.
    curves = pd.DataFrame.from_records(
        [
            {"method": m, "setting": s, "seed": 0, "round": r, "train_loss": 1.0 / (r + 1)}
            | {"test_acc": 10.0 * r}
            for m in ("DP-FedAvg", "Local SGD")
            for s in (json.dumps({"a": 1}), json.dumps({"a": 2}))
            for r in range(3)
        ]
    )
    with style.paper_style() as plt:
        fig = draw_curves(curves, {json.dumps({"a": 1}): "ε=2"}, ["DP-FedAvg", "Local SGD"])
        texts = [t.get_text() for t in fig.findobj(Text) if t.get_text()]
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        width = fig.get_figwidth()
        plt.close(fig)
    assert legend == ["DP-FedAvg", "Local SGD"]
    assert fig.get_suptitle() == ""
    assert not any("ran" in t or "ε 3.50" in t or "seeds" in t for t in texts)
    assert width == 6.9  # two settings: the page's width
