"""Commands that read finished runs: report, compare, runs, plot."""

from pathlib import Path
from typing import Annotated

import typer

from fedbench.cli.base import console, say, show
from fedbench.cli.options import metric_option, out_option
from fedbench.errors import FedbenchError


def report(
    targets: Annotated[
        list[Path],
        typer.Argument(
            help="A table folder OUT/<table>[-<preset>]; or several, merged into one report "
            "in --out (tables that share a setting and their columns)."
        ),
    ],
    paper_numbers: Annotated[
        bool,
        typer.Option(
            "--paper-numbers",
            help="Also put the paper's numbers in table.tex, as a separate labelled block.",
        ),
    ] = False,
    metric: Annotated[
        list[str] | None,
        metric_option(
            "Also report this metric, repeatable: e.g. local_step_ratio, client_drift, "
            "v_spread (runs with eval.diagnostics; mean over the evaluated rounds)."
        ),
    ] = None,
    ci: Annotated[
        bool,
        typer.Option(
            "--ci", help="Cells also show the 95% interval of the mean (summary.csv has it)."
        ),
    ] = False,
    out: Annotated[
        Path | None,
        out_option("With several table folders: the folder of the merged report.", folder=False),
    ] = None,
) -> None:
    """Rebuild a table folder's report (summary.csv, table.*, curves.png) from its runs, or
    merge several table folders' rows into one report (--out)."""
    from fedbench.report import build_report
    from fedbench.report.merge import merge_reports

    if len(targets) == 1 and out is None:
        result = build_report(targets[0], paper_numbers=paper_numbers, metrics=metric or [], ci=ci)
    elif out is None:
        raise FedbenchError(
            f"{len(targets)} table folders: give --out DIR, the folder of their merged report"
        )
    else:
        result = merge_reports(
            list(targets), out, paper_numbers=paper_numbers, metrics=metric or [], ci=ci
        )
    console.print(result.rich)
    say("wrote " + ", ".join(str(f) for f in result.files))


def compare(
    sides: Annotated[
        list[str],
        typer.Argument(
            help="Two or more rows, each FOLDER:ROW (ROW: a row label or a unique prefix of it)."
        ),
    ],
    metric: Annotated[str, metric_option("The metric compared.")] = "test_acc",
) -> None:
    """Is one row better than another beyond seed noise? A t-test over the seeds (paired where
    the rows ran the same seeds, else Welch's; Holm-corrected), in every column they share."""
    from fedbench.report.compare import compare_lines

    for part in compare_lines(sides, metric):
        console.print(part, highlight=False, soft_wrap=True)


def runs(
    directory: Annotated[
        Path, typer.Argument(help="An output folder (its runs/), or a runs/ folder.")
    ] = Path("results"),
    where: Annotated[
        list[str] | None,
        typer.Option(
            "--where", help="Keep runs whose config field (or status) has this value: k=v."
        ),
    ] = None,
    format_: Annotated[
        str,
        typer.Option(
            "--format",
            help="table (the terminal: only the columns that differ) | csv | json (every "
            "column, for scripts).",
        ),
    ] = "table",
    csv: Annotated[bool, typer.Option("--csv", help="The same as --format csv.")] = False,
) -> None:
    """List run folders: status, the settings that tell them apart, final metrics."""
    from fedbench.report.runs import runs_view

    view = runs_view(directory, where or [], format_, csv, width=console.width)
    if isinstance(view, str):  # CSV or JSON for scripts: plain stdout, never wrapped
        print(view, end="")
    else:
        console.print(view)


def plot(
    runs: Annotated[
        list[str],
        typer.Argument(
            help="Run folders (or run ids under ROOT/runs): their curves overlaid; or table "
            "folders with private rows: the privacy-utility figure (METRIC against epsilon)."
        ),
    ],
    metric: Annotated[
        str, metric_option("A metrics.jsonl column, e.g. test_acc, train_loss.")
    ] = "test_acc",
    out: Annotated[
        Path, out_option("The PNG to write (a PDF and a caption file beside it).", folder=False)
    ] = Path("plot.png"),
    root: Annotated[
        Path, typer.Option("--root", help="Output folder whose runs/ holds run ids.")
    ] = Path("results"),
    width: Annotated[
        str,
        typer.Option(
            "--width",
            help="The privacy-utility figure's width: column (3.3 in) or page (6.9 in).",
        ),
    ] = "column",
) -> None:
    """Overlay the curves of any runs (METRIC per evaluated round, one line per run), or draw
    the privacy-utility figure of table folders (METRIC against epsilon, one line per row)."""
    from fedbench.report.plots import plot_run_curves
    from fedbench.report.privacy_plot import parse_width, plot_privacy_utility, table_folders

    folders = table_folders(runs)
    if folders:
        files = plot_privacy_utility(folders, metric, out, parse_width(width))
    else:
        files = plot_run_curves(runs, metric, out, root / "runs")
    show("wrote " + ", ".join(str(f) for f in files))
