"""Commands that train: train, run, ablate, tune, figure."""

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from fedbench.cli.base import console, err_console, resume_command, say, show
from fedbench.cli.options import (
    DryRunOption,
    EstimateOption,
    LauncherOption,
    MethodsOption,
    OutOption,
    PresetOption,
    RayAddressOption,
    SeedsOption,
    SetOption,
    SmokeOption,
    TunedOption,
    WorkersOption,
    WritePlanOption,
    column_option,
    out_option,
    preset_option,
    rounds_option,
    workers_option,
)
from fedbench.errors import FedbenchError


def train(
    config: Annotated[
        Path | None, typer.Argument(help="A YAML run config (default: built-in defaults).")
    ] = None,
    set_: SetOption = None,
    out: Annotated[Path, out_option("Output folder.")] = Path("results"),
    save_model: Annotated[
        bool, typer.Option("--save-model", help="Write the final model.pt.")
    ] = False,
    print_config: Annotated[
        bool,
        typer.Option(
            "--print-config", help="Print the resolved config as YAML and exit; run nothing."
        ),
    ] = False,
    print_plan: Annotated[
        bool,
        typer.Option(
            "--print-plan",
            help="Print how the run would execute (executor, precision, compile, CUDA graphs, "
            "clipping, seeds together), each choice with its reason, and exit; train nothing.",
        ),
    ] = False,
) -> None:
    """Train one run; its folder is OUT/runs/<run_id>/. Reruns resume or skip a finished run."""
    from fedbench.runner.one_run import train_command

    report = train_command(
        config,
        set_ or [],
        out,
        save_model=save_model,
        print_config=print_config,
        print_plan=print_plan,
        console=console,
        resume=resume_command(),
    )
    if report.config is not None:
        print(report.config, end="")
        return
    show(report.lines)
    if report.error is not None:
        console.print(f"[red]{report.error}[/red]")
        raise typer.Exit(1)


def sweep_command(
    kind: Literal["table", "ablation"], argument: str, argument_help: str, doc: str
) -> Callable[..., None]:
    """The command that sweeps a table of KIND (`run`) or an ablation (`ablate`): one list of
    options for both; ARGUMENT names the table's argument in the help (TABLE, NAME)."""

    def command(
        name: Annotated[str, typer.Argument(help=argument_help)],
        preset: PresetOption = None,
        seeds: SeedsOption = None,
        methods: MethodsOption = None,
        set_: SetOption = None,
        out: OutOption = Path("results"),
        workers: WorkersOption = None,
        dry_run: DryRunOption = False,
        estimate: EstimateOption = False,
        write_plan: WritePlanOption = None,
        launcher: LauncherOption = "local",
        ray_address: RayAddressOption = None,
        tuned: TunedOption = None,
        smoke: SmokeOption = False,
    ) -> None:
        from fedbench.runner.orchestrate import SweepRequest, smoke_sweep, sweep

        request = SweepRequest(
            name=name,
            kind=kind,
            preset=preset,
            seeds=seeds,
            methods=methods,
            overrides=set_ or [],
            out=out,
            workers=workers,
            dry_run=dry_run,
            estimate=estimate,
            plan_file=write_plan,
            launcher=launcher,
            ray_address=ray_address,
            tuned_file=tuned,
        )
        if smoke:
            if smoke_sweep(request, say).exit_code:
                raise typer.Exit(1)
            return
        result = sweep(request, console=console, err_console=err_console, resume=resume_command())
        if result is None:  # a dry run: the plan is printed
            return
        assert result.report is not None  # the sweep built it while holding the folder
        console.print(result.report.rich)
        say(f"report: {result.folder}")
        if result.problems:
            console.print(f"[red]{len(result.problems)} run(s) failed or diverged:[/red]")
            for what, outcome in result.problems:
                say(f"  {outcome.status}: {what}: {outcome.error}")
            raise typer.Exit(1)

    # Typer reads the signature: the table's argument goes by ARGUMENT in the help and errors.
    signature = inspect.signature(command)
    first, *rest = signature.parameters.values()

    def renamed(**kwargs: Any) -> None:  # (Typer passes the command's own parameters)
        command(kwargs.pop(argument), **kwargs)

    # inspect reads a function's __signature__; mypy knows no such attribute on a function.
    renamed.__signature__ = signature.replace(parameters=[first.replace(name=argument), *rest])  # type: ignore[attr-defined]
    renamed.__doc__ = doc
    return renamed


run = sweep_command(
    "table",
    "table",
    "A table name (configs/<TABLE>.yaml) or a path.",
    "Every (row, column, seed) run of a paper table, then its report in OUT/<table>[-<preset>]/.",
)
ablate = sweep_command(
    "ablation",
    "name",
    "An ablation (configs/ablations/<NAME>.yaml) or a path.",
    "The same as `run` for an ablation table.",
)


def tune(
    table: Annotated[
        str, typer.Argument(help="A table or ablation name, or a table config's path.")
    ],
    space: Annotated[
        list[str] | None,
        typer.Option(
            "--space",
            help="A searched field, KEY=log:LOW:HIGH (or uniform:, int:); without --space and "
            "--grid each row searches the table config's `tuning:` space.",
        ),
    ] = None,
    grid: Annotated[
        list[str] | None,
        typer.Option("--grid", help="A field tried at listed values, KEY=V1,V2,..."),
    ] = None,
    trials: Annotated[
        int | None,
        typer.Option("--trials", help="Trials per (row, column) (default with --grid: all)."),
    ] = None,
    rounds: Annotated[int | None, rounds_option("Rounds per trial (default: the table's).")] = None,
    val_fraction: Annotated[
        float,
        typer.Option("--val-fraction", help="Training data held out to score trials on."),
    ] = 0.1,
    column: Annotated[
        list[str] | None,
        column_option("Tune only the columns with KEY=VALUE, repeatable."),
    ] = None,
    preset: PresetOption = None,
    methods: MethodsOption = None,
    set_: SetOption = None,
    out: OutOption = Path("results"),
    workers: WorkersOption = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the Optuna sampler.")] = 0,
    pruner: Annotated[
        str,
        typer.Option(
            "--pruner",
            help="Stop hopeless trials early: median (the default: Optuna's MedianPruner, after "
            "2 complete trials), halving (successive halving) or none.",
        ),
    ] = "median",
) -> None:
    """Tune each (row, column) on a validation split with Optuna; writes tuned.yaml for
    `fedbench run TABLE --tuned`. A killed tune resumes when run again."""
    from fedbench.runner.orchestrate import TuneRequest, tune_table

    request = TuneRequest(
        target=table,
        space=space or [],
        grid=grid or [],
        trials=trials,
        rounds=rounds,
        val_fraction=val_fraction,
        columns=column,
        preset=preset,
        methods=methods,
        overrides=set_ or [],
        out=out,
        workers=workers,
        seed=seed,
        pruner=pruner,
    )
    view, applied = tune_table(request, on_trial=say)
    show([view, applied])


def figure(
    name: Annotated[str, typer.Argument(help="The figure (fedbench list figures).")],
    preset: Annotated[str | None, preset_option("A preset of the figure, e.g. quick.")] = None,
    out: Annotated[Path, out_option("Output folder (runs/ and figures/ in it).")] = Path("results"),
    set_: SetOption = None,
    workers: Annotated[int | None, workers_option("Concurrent runs.", min=1)] = None,
    smoke: SmokeOption = False,
) -> None:
    """Run a figure's experiment (its runs resume like a table's), draw it (PNG, PDF, CSV) and
    check the claim the paper makes with it."""
    from fedbench.figures.make import make_figure

    if smoke:
        from fedbench.runner.smoke.check import smoke_figure

        if preset is not None or set_:
            raise FedbenchError("--smoke checks the paper settings; drop --preset and --set")
        if smoke_figure(name, say).exit_code:
            raise typer.Exit(1)
        return

    made = make_figure(name, preset=preset, out=out, overrides=set_, workers=workers)
    show([claim.line() for claim in made.claims])
    say(f"wrote {', '.join(path.name for path in made.files)} in {made.folder}")
