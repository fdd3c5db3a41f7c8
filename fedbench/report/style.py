"""The one look of fedbench's report figures (curves.png, the privacy-utility figure, `fedbench
plot`): sizes a paper takes as they are, fonts at LaTeX's sizes, plain tick labels, and the
what-ran text in a caption file and the files' metadata, never in the plot area.

Sizes: a figure is drawn at the width it is printed at, so that its fonts need no scaling: a
column of a two-column paper (3.3 in) or the page (6.9 in). Fonts: 9 pt labels and 8 pt ticks
and legends, LaTeX's \\small and \\footnotesize in a 10 pt document, in a Times-like serif
(STIX, shipped with matplotlib, which has every Greek letter and ± a label may hold).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fedbench.files import save_figure, write_file

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Width = Literal["column", "page"]
#: Inches: a column of a two-column paper (ICML, IEEE, ACM) and its full text width.
WIDTHS: dict[str, float] = {"column": 3.3, "page": 6.9}
#: Points: axis labels and panel titles (\small at 10 pt), ticks and legends (\footnotesize).
LABEL_PT = 9.0
SMALL_PT = 8.0
#: PNG resolution: a 3.3 in column is 990 pixels, sharp when printed.
DPI = 300

RC: dict[str, Any] = {
    "font.family": "serif",
    "font.serif": ["STIXGeneral", "DejaVu Serif"],
    "mathtext.fontset": "stix",
    "font.size": SMALL_PT,
    "axes.labelsize": LABEL_PT,
    "axes.titlesize": LABEL_PT,
    "xtick.labelsize": SMALL_PT,
    "ytick.labelsize": SMALL_PT,
    "legend.fontsize": SMALL_PT,
    "legend.frameon": False,
    "axes.linewidth": 0.6,
    "lines.linewidth": 1.2,
    "lines.markersize": 4.0,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "grid.linewidth": 0.4,
    "grid.alpha": 0.4,
    "axes.grid": True,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "savefig.pad_inches": 0.02,
}


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@contextmanager
def paper_style() -> Iterator[Any]:
    """pyplot with the report figures' rcParams in force (restored on exit)."""
    plt = pyplot()
    with plt.rc_context(RC):
        yield plt


def width_inches(width: Width) -> float:
    return WIDTHS[width]


def plain_number(value: float, _position: Any = None) -> str:
    """A tick label as a number is written: 2, 0.5, 1e-05 (never 2×10⁰)."""
    return f"{value:g}"


def plain_ticks(ax: Axes, axis: Literal["x", "y"] = "y") -> None:
    """Plain labels on `axis`: on a log axis the decades and, where the axis spans less than
    a few decades, the ticks between them, all as plain numbers ('0.3', '2')."""
    from matplotlib.ticker import FuncFormatter

    target = ax.yaxis if axis == "y" else ax.xaxis
    scale = ax.get_yscale() if axis == "y" else ax.get_xscale()
    if scale == "log":
        target.set_major_formatter(_plain_log(minor=False))
        target.set_minor_formatter(_plain_log(minor=True))
    else:
        target.set_major_formatter(FuncFormatter(plain_number))


def _plain_log(minor: bool) -> Any:
    """matplotlib's LogFormatter picks which ticks of a log axis get a label (on a minor tick:
    only where the axis spans less than a few decades); the label is then the plain number
    (its own reads '6e-01' below 1)."""
    from matplotlib.ticker import LogFormatter

    class PlainLogFormatter(LogFormatter):
        def __call__(self, x: float, pos: int | None = None) -> str:
            return plain_number(x) if super().__call__(x, pos) else ""

    if minor:
        return PlainLogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.4))
    return PlainLogFormatter(labelOnlyBase=False)


def save(fig: Figure, png: Path, caption: str, title: str) -> list[Path]:
    """Write PNG and PDF (the PDF beside the PNG, same stem) and the caption file
    `<stem>.caption.txt`; the caption also goes into both files' metadata (PNG: Title and
    Description; PDF: Title and Subject). Returns the paths written, each written atomically."""
    pdf = png.with_suffix(".pdf")
    text = png.with_name(f"{png.stem}.caption.txt")
    png.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, png, dpi=DPI, metadata={"Title": title, "Description": caption})
    save_figure(fig, pdf, metadata={"Title": title, "Subject": caption})
    write_file(text, f"{title}\n\n{caption}\n")
    return [png, pdf, text]
