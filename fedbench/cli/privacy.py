"""The privacy command: epsilon."""

from typing import Annotated

import typer

from fedbench.cli.base import show
from fedbench.cli.options import (
    MethodsOption,
    PresetOption,
    SeedsOption,
    SetOption,
    column_option,
)


def epsilon(
    config: Annotated[
        str | None,
        typer.Argument(
            help="A YAML run config with a privacy section, or a table config (path or name, "
            "e.g. dp_table2): then epsilon per (row, column) of its plan."
        ),
    ] = None,
    set_: SetOption = None,
    client_size: Annotated[
        int | None,
        typer.Option(
            "--client-size",
            help="Samples per client, skipping the data (e.g. CIFAR-10 / 50 clients = 1000).",
        ),
    ] = None,
    preset: PresetOption = None,
    methods: MethodsOption = None,
    column: Annotated[
        list[str] | None,
        column_option("Table configs: keep the columns with KEY=VALUE, repeatable."),
    ] = None,
    seeds: SeedsOption = None,
) -> None:
    """Print the epsilon a private config will spend (or the sigma calibrated to its target)."""
    from fedbench.report.epsilon import epsilon_view

    show(
        epsilon_view(
            config,
            overrides=set_ or [],
            client_size=client_size,
            preset=preset,
            methods=methods,
            columns=column or [],
            seeds=seeds,
        )
    )
