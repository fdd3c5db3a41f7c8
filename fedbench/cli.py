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
def blocks(
    model: Annotated[str, typer.Argument(help="A model name (fedbench list models).")],
    set_: SetOption = None,
    kind: Annotated[str, typer.Option("--kind", help="tensor | hessian | global")] = "hessian",
) -> None:
    """Print FedAdamW's block layout of MODEL: blocks per trainable tensor and the total B."""
    from fedbench.algorithms.hessian import block_layout
    from fedbench.config import load_run_config
    from fedbench.engine.setup import model_and_spec

    cfg = load_run_config(None, [f"model.name={model}", *(set_ or [])])
    spec = model_and_spec(cfg)
    rows = block_layout(spec, kind)
    _list_table(
        f"{model}: blocks: {kind}",
        ["parameter", "shape", "blocks"],
        [[n, "x".join(map(str, s)), str(c)] for n, s, c in rows],
    )
    console.print(f"d {spec.d}  tensors {len(rows)}  B {sum(c for *_, c in rows)}", highlight=False)


def _first_line(doc: str | None) -> str:
    lines = (doc or "").strip().splitlines()
    return lines[0] if lines else ""


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
        rows = [[name, _first_line(fn.__doc__)] for name, fn in DATASETS.items()]
        _list_table("datasets", ["name", "description"], rows)
    elif what == "models":
        rows = [[name, _first_line(fn.__doc__)] for name, fn in MODELS.items()]
        _list_table("models", ["name", "description"], rows)
    else:
        raise FedbenchError(f"cannot list {what!r}; choose algorithms, datasets or models")


def main() -> None:
    """Console entry point: user errors become one line on stderr and exit code 2.

    Typer's own usage errors (unknown option, missing argument) also exit with code 2.
    """
    try:
        app()
    except FedbenchError as exc:
        err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
