"""Issue 47, point 3: table.tex as a paper takes it: booktabs, a one-sentence caption, the setting
in a \\footnotesize note under the table, epsilon as a value (its own column, or the header's
note where a column's rows share it) with delta and the accounting status once, in a footnote,
one source line per row; compiled with pdflatex and rendered to PNG where they are installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fedbench.report import build_report
from tests.report.test_privacy_report import _dp_folder
from tests.report.test_privacy_utility import _folder, _table


def _body(tex: str) -> list[str]:
    """The tabular's lines between \\midrule and \\bottomrule: one per row."""
    lines = tex.splitlines()
    return lines[lines.index(r"\midrule") + 1 : lines.index(r"\bottomrule")]


def test_epsilon_shared_by_a_column_goes_to_its_header(tmp_path: Path) -> None:
    folder = _folder(tmp_path, _table("dp", True))
    build_report(folder)
    tex = (folder / "table.tex").read_text()
    # Every row of the ε=2 column spent 2.00 (the worst seed's 2.0): a header note, no column.
    assert r"\multicolumn{1}{c}{$\varepsilon$=2 ($\varepsilon$ 2.00$^\dagger$)}" in tex
    assert r"\multicolumn{1}{c}{$\varepsilon$=8 ($\varepsilon$ 7.99$^\dagger$)}" in tex
    assert "Method & Acc.\\ (\\%) & Acc.\\ (\\%) \\\\" in tex
    assert _body(tex) == [
        r"DP-A & \textbf{43.00 $\pm$ 3.61} & \textbf{62.00 $\pm$ 2.65} \\",
        r"DP-B & 32.00 $\pm$ 2.65 & 54.00 $\pm$ 3.61 \\",  # paired p 0.003, 0.02: no tie
    ]
    assert r"\caption{tiny test table: mean $\pm$ std over seeds.}" in tex
    note = next(line for line in tex.splitlines() if line.startswith(r"{\footnotesize"))
    assert note.startswith(
        r"{\footnotesize\raggedright $^\dagger$$\varepsilon$: the privacy a cell spent (each "
        r"run's worst client, by its accountant), the largest over the cell's seeds, at "
        r"$\delta$ = 1e-05; accounting: exact (Poisson batch sampling at q = B/n\_i). What ran:"
    )
    assert "no DP" not in note  # every row is private
    assert r"\usepackage{booktabs}" in tex.splitlines()[0] and "graphicx" not in tex
    assert "siunitx" not in tex and r"\resizebox" not in tex


def test_epsilon_that_differs_between_rows_is_a_column_of_values(tmp_path: Path) -> None:
    folder = _dp_folder(tmp_path)
    build_report(folder)
    tex = (folder / "table.tex").read_text()
    assert r"Method & Acc.\ (\%) & $\varepsilon$$^\dagger$ \\" in tex
    assert _body(tex) == [
        r"Local SGD & \textbf{61.00 $\pm$ 1.00} & no DP \\",
        r"DP-FedAvg & 41.00 $\pm$ 1.00 & 3.50 \\",
    ]
    assert "; no DP: a row without DP." in tex


def _compile(tmp_path: Path, tables: list[Path]) -> Path:
    """A plain article with booktabs and graphicx that \\input's each table.tex: pdflatex must
    compile it; the first page is rendered to PNG (pdftoppm) to be looked at."""
    doc = tmp_path / "doc.tex"
    inputs = "\n".join(f"\\input{{{t}}}" for t in tables)
    doc.write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\usepackage{graphicx}\n"
        f"\\begin{{document}}\n{inputs}\n\\end{{document}}\n"
    )
    result = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:]
    # No overfull box: the tables fit the text width as they are.
    assert not re.search(r"Overfull \\hbox \((\d\d+|[2-9])\.", result.stdout), result.stdout
    return tmp_path / "doc.pdf"


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="no LaTeX engine (pdflatex)")
def test_dp_tables_compile_with_the_article_class_and_render(tmp_path: Path) -> None:
    shared = _folder(tmp_path / "a", _table("dp", True))
    differing = _dp_folder(tmp_path / "b")
    build_report(shared)
    build_report(differing)
    pdf = _compile(tmp_path, [shared / "table.tex", differing / "table.tex"])
    assert pdf.stat().st_size > 5_000
    if shutil.which("pdftotext"):
        text = subprocess.run(
            ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True
        ).stdout
        assert "43.00 ± 3.61" in text and "DP-FedAvg" in text and "no DP" in text
    if shutil.which("pdftoppm") is None:
        pytest.skip("compiled; no pdftoppm (poppler-utils) to render the PDF to PNG")
    subprocess.run(
        ["pdftoppm", "-png", "-r", "100", "-f", "1", "-l", "1", str(pdf), "page"],
        cwd=tmp_path,
        check=True,
        timeout=60,
    )
    png = next(tmp_path.glob("page*.png"))
    assert png.stat().st_size > 5_000
