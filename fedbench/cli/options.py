"""Every option more than one command takes, defined once here (its name, help and checks);
a command adds its default. Where commands word an option's help their own way (`--out`: what
goes in the folder), a function here takes that help and still owns the option's name."""

from pathlib import Path
from typing import Annotated, Any

import typer

SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="Override a config field: key.path=value (YAML-typed), repeatable.",
    ),
]
SeedsOption = Annotated[
    str | None,
    typer.Option(
        "--seeds",
        help="N: the table's first N seeds (continued 0,1,2,... past its list, with a note); "
        "or an explicit list such as 0,3,7 (one seed: 7,).",
    ),
]
MethodsOption = Annotated[
    str | None, typer.Option("--methods", help="Comma-separated row labels to run (default all).")
]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Print the run plan and its cost; run nothing.")
]
SmokeOption = Annotated[
    bool,
    typer.Option(
        "--smoke",
        help="Train every (row, column) at its paper settings for one short round (2 clients x "
        "2 local steps) on generated data of the real shape, on this machine's device; one line "
        "per cell, exit 1 if any fails. Writes nothing to --out.",
    ),
]
EstimateOption = Annotated[
    bool,
    typer.Option(
        "--estimate",
        help="Measure each workload of the plan here with a short probe and print the plan "
        "with the estimated time; run nothing (implies --dry-run).",
    ),
]
WritePlanOption = Annotated[
    Path | None,
    typer.Option(
        "--write-plan",
        help="Write the plan (every run's id, cell and resolved config) as JSON to this file.",
    ),
]
LauncherOption = Annotated[
    str,
    typer.Option(
        "--launcher",
        help="local (worker processes on this machine) | ray (Ray tasks over a cluster's GPUs "
        "and nodes; needs Ray, the `ray` extra of fedbench).",
    ),
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="Ray cluster to use with --launcher ray, e.g. 10.0.0.1:6379 (default: RAY_ADDRESS, "
        "a cluster started on this machine, else a new local one).",
    ),
]
TunedOption = Annotated[
    Path | None,
    typer.Option(
        "--tuned",
        help="A tuned.yaml from `fedbench tune`: each cell runs at its tuned values "
        "(report in OUT/<table>[-<preset>]-tuned/).",
    ),
]


def preset_option(help: str = "A named preset of the table, e.g. quick.") -> Any:
    return typer.Option("--preset", help=help)


def out_option(
    help: str = "Output folder (runs/ and the table folder).", folder: bool = True
) -> Any:
    """--out; a `folder` (the default: every command but `plot`) is checked before anything runs:
    an existing file there, or below it, is one line instead of a failure after training."""
    return typer.Option("--out", help=help, callback=check_out_folder if folder else None)


def check_out_folder(value: Path) -> Path:
    """--out must be a folder or not exist yet; no part of it may be an existing file."""
    from fedbench.errors import FedbenchError

    for path in (value, *value.parents):
        if path.exists() and not path.is_dir():
            where = "is a file" if path == value else f"is below the file {path}"
            raise FedbenchError(f"--out {value} {where}; give a folder (it is created if missing)")
    return value


def workers_option(
    help: str = (
        "Parallel runs (default: one per GPU, else one per CPU core; two per core while other "
        "jobs hold the cores)."
    ),
    min: int | None = None,
) -> Any:
    return typer.Option("--workers", help=help, min=min)


def metric_option(help: str) -> Any:
    return typer.Option("--metric", help=help)


def column_option(help: str) -> Any:
    return typer.Option("--column", help=help)


def rounds_option(help: str, min: int | None = None) -> Any:
    return typer.Option("--rounds", help=help, min=min)


PresetOption = Annotated[str | None, preset_option()]
OutOption = Annotated[Path, out_option()]
WorkersOption = Annotated[int | None, workers_option()]
