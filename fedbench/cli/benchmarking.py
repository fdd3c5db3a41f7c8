"""The benchmarking command: bench."""

import json
from pathlib import Path
from typing import Annotated

import typer

from fedbench.cli.base import console, show
from fedbench.cli.options import SetOption, out_option, rounds_option


def bench(
    config: Annotated[
        Path | None, typer.Argument(help="A YAML run config (default: built-in defaults).")
    ] = None,
    set_: SetOption = None,
    rounds: Annotated[int, rounds_option("Timed rounds per repeat.", min=1)] = 3,
    warmup: Annotated[int, typer.Option("--warmup", min=0, help="Untimed warm-up rounds.")] = 1,
    repeats: Annotated[
        int, typer.Option("--repeats", min=1, help="Repeats; the best is kept.")
    ] = 3,
    threads: Annotated[
        int | None,
        typer.Option(
            "--threads",
            min=1,
            help="torch CPU threads (default: runtime.threads, else chosen from the free cores).",
        ),
    ] = None,
    json_: Annotated[
        bool, typer.Option("--json", help="Print one JSON object as the last line.")
    ] = False,
    suite: Annotated[
        str | None,
        typer.Option(
            "--suite", help="Run a suite of workloads instead of CONFIG: table1 (Table 1 shapes)."
        ),
    ] = None,
    out: Annotated[Path, out_option("Where --suite writes <device>.json.")] = Path(
        "benchmarks/results"
    ),
    row_timeout: Annotated[
        float | None,
        typer.Option(
            "--row-timeout",
            min=1,
            help="--suite: seconds each row may take; a slower row is recorded as timed out.",
        ),
    ] = None,
) -> None:
    """Throughput of the engine (client steps/s) and its overhead over a bare PyTorch loop."""
    from fedbench.engine.bench import result_listing
    from fedbench.runner.bench_suite import measure

    result, path = measure(
        config,
        set_ or [],
        rounds=rounds,
        warmup=warmup,
        repeats=repeats,
        threads=threads,
        suite=suite,
        out_dir=out,
        log=None if json_ else console.print,
        row_timeout_s=row_timeout,
    )
    if json_:
        print(json.dumps(result))
    elif path is not None:
        console.print(f"wrote {path}: projected Table 1 hours {result['projected_table1_hours']}")
    else:
        show(result_listing(result))
