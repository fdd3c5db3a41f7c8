"""The `fedbench` command line (Typer): thin; parses, loads the config, calls the engine."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from fedbench.errors import FedbenchError

app = typer.Typer(
    name="fedbench",
    help="Reproducible federated-optimisation experiments (FedAdamW, DP-FedAdamW, FedAdamom).",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a config field: key.path=value (YAML-typed), repeatable."),
]


@app.command()
def train(
    config: Annotated[
        Path | None, typer.Argument(help="A YAML run config (default: built-in defaults).")
    ] = None,
    set_: SetOption = None,
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("results"),
    save_model: Annotated[
        bool, typer.Option("--save-model", help="Write the final model.pt.")
    ] = False,
) -> None:
    """Train one run; its folder is OUT/runs/<run_id>/. Reruns resume or skip a finished run."""
    from fedbench.config import load_run_config
    from fedbench.engine import train as run_training

    cfg = load_run_config(config, set_ or [])
    result = run_training(cfg, out, save_model=save_model, console=console)
    summary = result.summary
    if result.status == "skipped":
        console.print(
            f"run {result.run_dir.name} is already done ({summary.get('status')}): {result.run_dir}"
        )
        return
    final = summary.get("final", {})
    console.print(
        f"{result.status}: {result.run_dir}  test_acc {final.get('test_acc')}  "
        f"train_loss {final.get('train_loss')}  d {summary.get('d')}  wall {summary.get('wall_s')} s",
        highlight=False,
        soft_wrap=True,
    )
    if result.status != "completed":
        console.print(f"[red]{summary.get('error')}[/red]")
        raise typer.Exit(1)


@app.command()
def bench(
    config: Annotated[
        Path | None, typer.Argument(help="A YAML run config (default: built-in defaults).")
    ] = None,
    set_: SetOption = None,
    rounds: Annotated[int, typer.Option(min=1, help="Timed rounds per repeat.")] = 3,
    warmup: Annotated[int, typer.Option(min=0, help="Untimed warm-up rounds.")] = 1,
    repeats: Annotated[int, typer.Option(min=1, help="Repeats; the best is kept.")] = 3,
    threads: Annotated[
        int | None, typer.Option(min=1, help="torch CPU threads (default: torch's choice).")
    ] = None,
    json_: Annotated[
        bool, typer.Option("--json", help="Print one JSON object as the last line.")
    ] = False,
) -> None:
    """Throughput of the engine (client steps/s) and its overhead over a bare PyTorch loop."""
    import json

    from fedbench.config import load_run_config
    from fedbench.engine.bench import run_bench

    cfg = load_run_config(config, set_ or [])
    if threads is not None:
        import torch

        torch.set_num_threads(threads)
    result = run_bench(cfg, rounds=rounds, warmup=warmup, repeats=repeats)
    if json_:
        print(json.dumps(result))
        return
    table = Table(title=f"fedbench bench: {result['workload']} ({result['algorithm']})")
    table.add_column("field")
    table.add_column("value", justify="right")
    for key, value in result.items():
        table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    console.print(table)


def _list_table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    table = Table(title=title)
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    console.print(table)


@app.command("list")
def list_(
    what: Annotated[str, typer.Argument(help="algorithms | datasets | models")] = "algorithms",
) -> None:
    """List what fedbench knows by name."""
    from fedbench.algorithms import ALGORITHMS
    from fedbench.data import DATASETS
    from fedbench.models import MODELS

    if what == "algorithms":
        rows = [[name, cls.paper, cls.client_state_desc] for name, cls in ALGORITHMS.items()]
        _list_table("algorithms", ["name", "paper", "per-client state"], rows)
    elif what == "datasets":
        rows = [[name, (fn.__doc__ or "").strip().splitlines()[0]] for name, fn in DATASETS.items()]
        _list_table("datasets", ["name", "description"], rows)
    elif what == "models":
        rows = [[name, (fn.__doc__ or "").strip().splitlines()[0]] for name, fn in MODELS.items()]
        _list_table("models", ["name", "description"], rows)
    else:
        raise FedbenchError(f"cannot list {what!r}; choose algorithms, datasets or models")


def main() -> None:
    """Console entry point: user errors become one line on stderr and exit code 2."""
    try:
        app(standalone_mode=False)
    except FedbenchError as exc:
        err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        err_console.print("aborted", markup=False)
        sys.exit(130)
    except Exception as exc:  # click usage errors (unknown option, missing argument)
        import click

        if isinstance(exc, click.ClickException):
            err_console.print(
                f"error: {exc.format_message()}", markup=False, highlight=False, soft_wrap=True
            )
            sys.exit(2)
        raise
