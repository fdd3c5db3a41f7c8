"""Commands that show what fedbench knows: list, blocks."""

from typing import Annotated

import typer

from fedbench.catalog import KINDS
from fedbench.cli.base import show
from fedbench.cli.options import SetOption


def list_(
    what: Annotated[str, typer.Argument(help=" | ".join(KINDS))] = "algorithms",
    name: Annotated[
        str | None,
        typer.Argument(help="With `algorithms`: one algorithm's hyperparameters in full."),
    ] = None,
) -> None:
    """List what fedbench knows by name; `list algorithms NAME` shows NAME's every setting."""
    from fedbench.catalog import catalog

    show(catalog(what, name))


def blocks(
    model: Annotated[str, typer.Argument(help="A model name (fedbench list models).")],
    set_: SetOption = None,
    kind: Annotated[
        str, typer.Option("--kind", help="auto | tensor | module | hessian | dp_paper | global")
    ] = "auto",
) -> None:
    """Print FedAdamW's block layout of MODEL: blocks per trainable tensor and the total B
    (`--kind auto`, the default, shows which partition auto picks for this model)."""
    from fedbench.catalog import block_view

    show(block_view(model, kind, set_ or []))
