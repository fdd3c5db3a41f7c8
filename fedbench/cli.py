"""The `fedbench` command line (Typer): thin; parses, loads the config, calls the engine."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from fedbench.errors import FedbenchError, Interrupted

if TYPE_CHECKING:
    from fedbench.config import RunConfig

app = typer.Typer(
    name="fedbench",
    help="Reproducible federated-optimisation experiments (FedAdamW, DP-FedAdamW, FedAdamom).",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    # Plain click help: typer's rich panels print a `<bool>` placeholder after every flag.
    rich_markup_mode=None,
)
# Off a terminal (logs, CI) rich would wrap at 80 columns; tables read better wider.
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True)


def _version(value: bool) -> None:
    if value:
        import fedbench

        console.print(f"fedbench {fedbench.__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Reproducible federated-optimisation experiments (FedAdamW, DP-FedAdamW, FedAdamom)."""


SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="Override a config field: key.path=value (YAML-typed), repeatable.",
    ),
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
    print_config: Annotated[
        bool,
        typer.Option(
            "--print-config", help="Print the resolved config as YAML and exit; run nothing."
        ),
    ] = False,
) -> None:
    """Train one run; its folder is OUT/runs/<run_id>/. Reruns resume or skip a finished run."""
    from fedbench.config import load_run_config
    from fedbench.engine import train as run_training

    cfg = load_run_config(config, set_ or [])
    if print_config:
        _print_config(cfg, out)
        return
    try:
        result = run_training(cfg, out, save_model=save_model, console=console)
    except KeyboardInterrupt:
        from fedbench.engine.run_folder import RunFolder

        folder = RunFolder.for_config(out, cfg)
        resume = shlex.join(["fedbench", *sys.argv[1:]])
        raise Interrupted(folder.interrupted_line(cfg.fl.rounds, resume)) from None
    summary = result.summary
    if result.status == "skipped":
        console.print(
            f"run {result.run_dir.name} is already done ({summary.get('status')}): {result.run_dir}",
            highlight=False,
            soft_wrap=True,
        )
        return
    console.print(
        f"{result.status}: {result.run_dir}  {final_line(summary)}", highlight=False, soft_wrap=True
    )
    if result.status == "stopped":  # asked to stop (a STOP file in the run folder): not an error
        console.print(f"stopped on request: {summary.get('error')}", highlight=False)
    elif result.status != "completed":
        console.print(f"[red]{summary.get('error')}[/red]")
        raise typer.Exit(1)


@app.command()
def blocks(
    model: Annotated[str, typer.Argument(help="A model name (fedbench list models).")],
    set_: SetOption = None,
    kind: Annotated[
        str, typer.Option("--kind", help="auto | tensor | module | hessian | dp_paper | global")
    ] = "auto",
) -> None:
    """Print FedAdamW's block layout of MODEL: blocks per trainable tensor and the total B
    (`--kind auto`, the default, shows which partition auto picks for this model)."""
    from fedbench.algorithms.blocks import BLOCK_KINDS, block_layout, resolve_blocks
    from fedbench.config import load_run_config
    from fedbench.engine.setup import model_and_spec

    if kind not in BLOCK_KINDS:
        raise FedbenchError(
            f"--kind {kind} is not a partition; use one of {', '.join(BLOCK_KINDS)}"
        )
    cfg = load_run_config(None, [f"model.name={model}", *(set_ or [])])
    spec = model_and_spec(cfg)
    resolved = resolve_blocks(kind, spec)
    rows = block_layout(spec, resolved)
    shown = f"auto -> {resolved}" if kind == "auto" else kind
    _list_table(
        f"{model}: blocks: {shown}",
        ["parameter", "shape", "blocks"],
        [[n, "x".join(map(str, s)), str(c)] for n, s, c in rows],
    )
    console.print(
        f"blocks: {shown}  d {spec.d}  tensors {len(rows)}  B {sum(c for *_, c in rows)}",
        highlight=False,
    )


def _print_config(cfg: RunConfig, out: Path) -> None:
    """`train --print-config`: the resolved config (what config.yaml will hold), plain YAML."""
    import yaml

    from fedbench.data.base import resolved_location

    print(f"# run folder: {out / 'runs' / cfg.run_id()}")
    print(f"# data.path / data.root resolve to: {resolved_location(cfg.data)}")
    print(yaml.safe_dump(cfg.to_dict(), sort_keys=False), end="")


def _fmt(value: object, spec: str) -> str:
    return format(value, spec) if isinstance(value, int | float) else "-"


def final_line(summary: dict) -> str:
    """A finished run's scores, rounded for reading (the run folder keeps full precision)."""
    final = summary.get("final") or {}
    parts = [
        f"test_acc {_fmt(final.get('test_acc'), '.2f')}",
        f"train_loss {_fmt(final.get('train_loss'), '.4f')}",
    ]
    if summary.get("epsilon") is not None:
        parts.append(f"epsilon {summary['epsilon']:.2f} (delta {summary.get('delta'):g})")
    parts += [f"d {summary.get('d')}", f"wall {_fmt(summary.get('wall_s'), '.2f')} s"]
    return "  ".join(parts)


def _first_line(doc: str | None) -> str:
    """A docstring's first paragraph on one line (a sentence may span source lines)."""
    paragraph = (doc or "").strip().split("\n\n")[0]
    return " ".join(line.strip() for line in paragraph.splitlines())


PresetOption = Annotated[
    str | None, typer.Option("--preset", help="A named preset of the table, e.g. quick.")
]
SeedsOption = Annotated[
    str | None,
    typer.Option(
        "--seeds",
        help="N: the table's first N seeds (continued 0,1,2,... past its list, with a note); "
        "or an explicit list such as 0,3,7 (one seed: 7,).",
    ),
]


def _parse_seeds(text: str | None) -> int | list[int] | None:
    """`--seeds 3` -> 3 (the first three); `--seeds 0,3,7` -> [0, 3, 7]."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise FedbenchError(
            f"--seeds {text!r} is neither a count nor a list of integers; e.g. --seeds 3 or 0,3,7"
        ) from None
    if not values:
        raise FedbenchError("--seeds is empty; e.g. --seeds 3 or --seeds 0,3,7")
    return values if "," in text else values[0]


MethodsOption = Annotated[
    str | None, typer.Option("--methods", help="Comma-separated row labels to run (default all).")
]
OutOption = Annotated[
    Path, typer.Option("--out", help="Output folder (runs/ and the table folder).")
]
WorkersOption = Annotated[
    int | None,
    typer.Option("--workers", help="Parallel runs (default: one per GPU, else one per CPU core)."),
]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Print the run plan and its cost; run nothing.")
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


def _check_launcher(
    launcher: str, workers: int | None, ray_address: str | None, dry_run: bool
) -> None:
    """The launcher options of run/ablate, checked before anything is planned or written."""
    if launcher not in ("local", "ray"):
        raise FedbenchError(f"unknown --launcher {launcher!r}; use local or ray")
    if workers is not None and workers < 1:
        raise FedbenchError("--workers must be at least 1")
    if launcher == "ray" and workers is not None:
        raise FedbenchError(
            "--workers is for the local launcher; on Ray set --set runtime.cpus_per_run=N "
            "(and runtime.gpus_per_run) instead"
        )
    if launcher == "local" and ray_address is not None:
        raise FedbenchError("--ray-address needs --launcher ray")
    if launcher == "ray" and not dry_run:
        from fedbench.runner.ray_launcher import import_ray

        import_ray()  # the install hint


def _sweep(
    kind: str,
    name: str,
    preset: str | None,
    seeds: str | None,
    methods: str | None,
    set_: list[str] | None,
    out: Path,
    workers: int | None,
    dry_run: bool,
    launcher: str,
    ray_address: str | None = None,
    plan_file: Path | None = None,
    tuned_file: Path | None = None,
    estimate: bool = False,
) -> None:
    from fedbench.runner.sweep import (
        make_plan,
        print_dry_run,
        run_sweep,
        seeds_note,
        write_json_plan,
    )
    from fedbench.runner.table_config import load_table
    from fedbench.runner.tune import load_tuned

    dry_run = dry_run or estimate
    _check_launcher(launcher, workers, ray_address, dry_run)
    rows = [m.strip() for m in methods.split(",") if m.strip()] if methods else None
    table_kind = "ablation" if kind == "ablate" else "table"
    tuned = load_tuned(tuned_file, load_table(name, table_kind)) if tuned_file else None
    plan = make_plan(
        name,
        table_kind,
        preset=preset,
        seeds=_parse_seeds(seeds),
        methods=rows,
        overrides=set_ or [],
        tuned=tuned,
    )
    note = seeds_note(plan)
    if note:
        console.print(note, highlight=False, soft_wrap=True)
    if plan_file is not None:
        write_json_plan(plan, plan_file)
        console.print(f"plan: {plan_file}", highlight=False, soft_wrap=True)
    if dry_run:
        print_dry_run(plan, out, console=console, err_console=err_console, probe=estimate)
        return
    try:
        result = run_sweep(
            plan,
            out,
            workers=workers,
            console=console,
            launcher="ray" if launcher == "ray" else "local",
            ray_address=ray_address,
            report=True,
        )
    except KeyboardInterrupt:
        from fedbench.engine.run_folder import RunFolder

        runs = {r.run_id: r for r in plan.runs}
        done = sum(RunFolder.for_config(out, r.cfg).is_finished() for r in runs.values())
        raise Interrupted(
            f"interrupted {plan.name} after {done} of {len(runs)} runs; finished runs are kept "
            f"and unfinished ones resume from their checkpoints in {out / 'runs'}; resume: "
            + shlex.join(["fedbench", *sys.argv[1:]])
        ) from None
    report = result.report
    assert report is not None  # run_sweep(report=True) built it while holding the folder
    console.print(report.rich)
    console.print(f"report: {result.folder}", highlight=False, soft_wrap=True)
    if result.problems:
        console.print(f"[red]{len(result.problems)} run(s) failed or diverged:[/red]")
        for what, outcome in result.problems:
            console.print(
                f"  {outcome.status}: {what}: {outcome.error}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        raise typer.Exit(1)


@app.command()
def run(
    table: Annotated[str, typer.Argument(help="A table name (configs/<TABLE>.yaml) or a path.")],
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
) -> None:
    """Every (row, column, seed) run of a paper table, then its report in OUT/<table>[-<preset>]/."""
    _sweep(
        "run",
        table,
        preset,
        seeds,
        methods,
        set_,
        out,
        workers,
        dry_run,
        launcher,
        ray_address=ray_address,
        plan_file=write_plan,
        tuned_file=tuned,
        estimate=estimate,
    )


@app.command()
def ablate(
    name: Annotated[
        str, typer.Argument(help="An ablation (configs/ablations/<NAME>.yaml) or a path.")
    ],
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
) -> None:
    """The same as `run` for an ablation table."""
    _sweep(
        "ablate",
        name,
        preset,
        seeds,
        methods,
        set_,
        out,
        workers,
        dry_run,
        launcher,
        ray_address=ray_address,
        plan_file=write_plan,
        tuned_file=tuned,
        estimate=estimate,
    )


@app.command()
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
    rounds: Annotated[
        int | None, typer.Option("--rounds", help="Rounds per trial (default: the table's).")
    ] = None,
    val_fraction: Annotated[
        float,
        typer.Option("--val-fraction", help="Training data held out to score trials on."),
    ] = 0.1,
    column: Annotated[
        list[str] | None,
        typer.Option("--column", help="Tune only the columns with KEY=VALUE, repeatable."),
    ] = None,
    preset: PresetOption = None,
    methods: MethodsOption = None,
    set_: SetOption = None,
    out: OutOption = Path("results"),
    workers: WorkersOption = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the Optuna sampler.")] = 0,
) -> None:
    """Tune each (row, column) on a validation split with Optuna; writes tuned.yaml for
    `fedbench run TABLE --tuned`. A killed tune resumes when run again."""
    from fedbench.runner.launcher import launch
    from fedbench.runner.tune import parse_grid, parse_space, plan_to_tune
    from fedbench.runner.tune import tune as run_tune

    if workers is not None and workers < 1:
        raise FedbenchError("--workers must be at least 1")
    if not 0 <= seed < 2**32:
        raise FedbenchError(f"--seed {seed} is out of range; the sampler's seed is in [0, 2**32)")
    fields = [parse_space(s) for s in space or []] + [parse_grid(g) for g in grid or []]
    rows = [m.strip() for m in methods.split(",") if m.strip()] if methods else None
    plan, command = plan_to_tune(table, preset=preset, methods=rows, overrides=set_ or [])
    result = run_tune(
        plan,
        fields,
        out=out,
        trials=trials,
        rounds=rounds,
        val_fraction=val_fraction,
        launch=lambda p: launch(p, out, workers=workers, console=None),
        columns=column,
        seed=seed,
        batch=workers or 1,
        on_trial=lambda line: console.print(line, markup=False, highlight=False, soft_wrap=True),
    )
    view = Table(title=f"{plan.name}: tuned on a {val_fraction:g} validation split")
    for name in (
        "method",
        "column (what ran)",
        "best values",
        "val test_acc",
        "done/pruned/failed",
    ):
        view.add_column(name, overflow="fold")
    for method, col, values, score, done, pruned, failed in result.rows:
        shown = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items()
        )
        label = result.labels.get((method, col), col)
        view.add_row(method, label, shown or "-", f"{score:.2f}", f"{done}/{pruned}/{failed}")
    console.print(view)
    tuned_file = result.folder / "tuned.yaml"
    # The same --preset and --set as this tune, so that the run trains the columns tuned here.
    again = "".join(f"--set {shlex.quote(s)} " for s in set_ or [])
    how = (
        f"`fedbench {command} {table} {'--preset ' + preset + ' ' if preset else ''}{again}"
        f"--tuned {tuned_file}`"
        if command != "train"
        else "--set with the values above"
    )
    console.print(f"wrote {tuned_file}; apply it with {how}", highlight=False, soft_wrap=True)


@app.command()
def report(
    target: Annotated[Path, typer.Argument(help="A table folder OUT/<table>[-<preset>].")],
    paper_numbers: Annotated[
        bool,
        typer.Option(
            "--paper-numbers",
            help="Also put the paper's numbers in table.tex, as a separate labelled block.",
        ),
    ] = False,
    metric: Annotated[
        list[str] | None,
        typer.Option(
            "--metric",
            help="Also report this metric, repeatable: e.g. local_step_ratio, client_drift, "
            "v_spread (runs with eval.diagnostics; mean over the evaluated rounds).",
        ),
    ] = None,
) -> None:
    """Rebuild a table folder's report (summary.csv, table.*, curves.png) from its runs."""
    from fedbench.report import build_report

    result = build_report(target, paper_numbers=paper_numbers, metrics=metric or [])
    console.print(result.rich)
    console.print(
        "wrote " + ", ".join(str(f) for f in result.files), highlight=False, soft_wrap=True
    )


@app.command()
def compare(
    sides: Annotated[
        list[str],
        typer.Argument(
            help="Two or more rows, each FOLDER:ROW (ROW: a row label or a unique prefix of it)."
        ),
    ],
    metric: Annotated[str, typer.Option("--metric", help="The metric compared.")] = "test_acc",
) -> None:
    """Is one row better than another beyond seed noise? Welch's t-test over the seeds, in every
    column the rows share (rows of one report, or one row at two settings)."""
    from fedbench.report.compare import compare as run_compare
    from fedbench.report.compare import render

    for part in render(run_compare(sides, metric), metric):
        console.print(part, highlight=False, soft_wrap=True)


@app.command()
def figure(
    name: Annotated[str, typer.Argument(help="The figure (fedbench list figures).")],
    preset: Annotated[
        str | None, typer.Option("--preset", help="A preset of the figure, e.g. quick.")
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", help="Output folder (runs/ and figures/ in it).")
    ] = Path("results"),
    set_: SetOption = None,
    workers: Annotated[int | None, typer.Option(min=1, help="Concurrent runs.")] = None,
) -> None:
    """Run a figure's experiment (its runs resume like a table's), draw it (PNG, PDF, CSV) and
    check the claim the paper makes with it."""
    from fedbench.figures.make import make_figure

    made = make_figure(name, preset=preset, out=out, overrides=set_, workers=workers)
    for claim in made.claims:
        console.print(claim.line(), highlight=False, soft_wrap=True)
    console.print(
        f"wrote {', '.join(path.name for path in made.files)} in {made.folder}",
        highlight=False,
        soft_wrap=True,
    )


@app.command("runs")
def runs_(
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
    from fedbench.report.runs import as_json, as_rich, list_runs

    if format_ not in ("table", "csv", "json"):
        raise FedbenchError(f"--format {format_!r} is not a format; use table, csv or json")
    if csv and format_ not in ("table", "csv"):
        raise FedbenchError(f"--csv and --format {format_} disagree; give one of them")
    frame = list_runs(directory, where or [])
    if csv or format_ == "csv":
        print(frame.to_csv(index=False), end="")
    elif format_ == "json":
        print(as_json(frame))
    else:
        console.print(as_rich(frame, f"runs in {directory}: {len(frame)}"))


@app.command()
def plot(
    runs: Annotated[list[str], typer.Argument(help="Run folders (or run ids under OUT/runs).")],
    metric: Annotated[
        str, typer.Option("--metric", help="A metrics.jsonl column, e.g. test_acc, train_loss.")
    ] = "test_acc",
    out: Annotated[Path, typer.Option("--out", help="The PNG to write.")] = Path("plot.png"),
    root: Annotated[
        Path, typer.Option("--root", help="Output folder whose runs/ holds run ids.")
    ] = Path("results"),
) -> None:
    """Overlay the curves of any runs: METRIC per evaluated round, one line per run."""
    from fedbench.report.plots import plot_runs
    from fedbench.report.runs import read_curves

    series, keys = read_curves(runs, root / "runs")
    missing = [label for label, rows in series.items() if metric not in rows.columns]
    if missing:
        have = sorted({c for rows in series.values() for c in rows.columns} - {"round"})
        raise FedbenchError(
            f"--metric {metric} is not in the metrics.jsonl of {missing[0]}; "
            f"choose one of {', '.join(have)}"
        )
    title = f"{metric} per round" + (f"; runs differ in {', '.join(keys)}" if keys else "")
    plot_runs(series, metric, out, title)
    console.print(f"wrote {out}", highlight=False, soft_wrap=True)


@app.command()
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
        typer.Option(
            "--column", help="Table configs: keep the columns with KEY=VALUE, repeatable."
        ),
    ] = None,
    seeds: SeedsOption = None,
) -> None:
    """Print the epsilon a private config will spend (or the sigma calibrated to its target)."""
    from fedbench.config import load_run_config, read_yaml
    from fedbench.privacy.report import describe_privacy

    path = Path(config) if config is not None else None
    table_name: str | None = None
    if path is not None and path.is_file():
        data = read_yaml(path)
        if "table" in data and "methods" in data:
            table_name = config
    elif config is not None and path is not None and path.suffix not in (".yaml", ".yml"):
        table_name = config  # a table name: configs/dp/<name>.yaml
    if table_name is not None:
        _table_epsilon(table_name, preset, seeds, methods, column or [], set_ or [], client_size)
        return
    if preset or methods or column or seeds:
        raise FedbenchError("--preset, --methods, --column and --seeds apply to table configs only")
    cfg = load_run_config(path, set_ or [])
    console.print(describe_privacy(cfg, client_size), highlight=False, soft_wrap=True)


def _table_epsilon(
    name: str,
    preset: str | None,
    seeds: str | None,
    methods: str | None,
    columns: list[str],
    set_: list[str],
    client_size: int | None,
) -> None:
    """`fedbench epsilon TABLE`: epsilon of every private (row, column) of the table's plan."""
    from fedbench.privacy.report import parse_column_picks, table_epsilons
    from fedbench.runner.sweep import make_plan
    from fedbench.runner.table_config import load_table

    rows = [m.strip() for m in methods.split(",") if m.strip()] if methods else None
    picks = parse_column_picks(columns, load_table(name))
    plan = make_plan(name, preset=preset, seeds=_parse_seeds(seeds), methods=rows, overrides=set_)
    cells = table_epsilons(plan, client_size, picks)
    if not cells:
        raise FedbenchError(f"{plan.name}: no private run in the selection (no privacy section)")
    _list_table(
        f"{plan.name}: epsilon of the worst client (over seeds "
        f"{','.join(str(s) for s in sorted({r.seed for r in plan.runs}))})",
        ["method", "column", "epsilon", "delta", "noise_multiplier"],
        [[m, c, f"{e:.2f}", f"{d:g}", f"{s:.4g}"] for m, c, e, d, s in cells],
    )


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
    suite: Annotated[
        str | None,
        typer.Option(help="Run a suite of workloads instead of CONFIG: table1 (Table 1 shapes)."),
    ] = None,
    out: Annotated[Path, typer.Option(help="Where --suite writes <device>.json.")] = Path(
        "benchmarks/results"
    ),
) -> None:
    """Throughput of the engine (client steps/s) and its overhead over a bare PyTorch loop."""
    import json

    from fedbench.config import load_run_config
    from fedbench.engine.bench import run_bench

    if suite is not None:
        from fedbench.engine.bench_suite import run_suite

        if config is not None:
            raise FedbenchError("--suite runs its own configs; drop CONFIG (use --set to scale)")
        path, result = run_suite(
            suite,
            sets=set_ or [],
            rounds=rounds,
            warmup=warmup,
            repeats=repeats,
            threads=threads,
            out_dir=out,
            log=None if json_ else console.print,
        )
        if json_:
            print(json.dumps(result))
        else:
            console.print(
                f"wrote {path}: projected Table 1 hours {result['projected_table1_hours']}"
            )
        return
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
    what: Annotated[
        str,
        typer.Argument(
            help="tables | ablations | algorithms | datasets | models | partitions | figures"
        ),
    ] = "algorithms",
    name: Annotated[
        str | None,
        typer.Argument(help="With `algorithms`: one algorithm's hyperparameters in full."),
    ] = None,
) -> None:
    """List what fedbench knows by name; `list algorithms NAME` shows NAME's every setting."""
    if name is not None:
        if what != "algorithms":
            raise FedbenchError(f"a NAME applies to `fedbench list algorithms NAME`, not {what}")
        _show_algorithm(name)
        return
    from fedbench.algorithms import ALGORITHMS
    from fedbench.data import DATASETS
    from fedbench.models import MODELS

    if what in ("tables", "ablations"):
        from fedbench.config import read_yaml
        from fedbench.runner.table_config import find_table, list_tables

        kind = "table" if what == "tables" else "ablation"
        rows = []
        for name in list_tables(kind):
            path = find_table(name, kind)
            data = read_yaml(path)
            presets = ", ".join(sorted(data.get("presets") or {})) if isinstance(data, dict) else ""
            rows.append([name, str(data.get("title", "")), presets, str(path)])
        _list_table(what, ["name", "title", "presets", "file"], rows)
    elif what == "algorithms":
        rows = [
            [name, cls.paper, cls.comm_up_label, cls.client_state_desc]
            for name, cls in ALGORITHMS.items()
        ]
        _list_table("algorithms", ["name", "paper", "comm_up", "per-client state"], rows)
    elif what == "datasets":
        rows = [[name, _first_line(fn.__doc__)] for name, fn in DATASETS.items()]
        _list_table("datasets", ["name", "description"], rows)
    elif what == "models":
        rows = [[name, _first_line(fn.__doc__)] for name, fn in MODELS.items()]
        _list_table("models", ["name", "description"], rows)
    elif what == "partitions":
        from fedbench.partitions import PARTITIONS

        rows = [[name, _first_line(fn.__doc__)] for name, fn in PARTITIONS.items()]
        _list_table("partitions", ["name", "description"], rows)
    elif what == "figures":
        from fedbench.figures import FIGURES

        rows = [
            [name, cls.paper, cls.title, ", ".join(sorted(cls.presets))]
            for name, cls in FIGURES.items()
        ]
        _list_table("figures", ["name", "paper", "what it shows", "presets"], rows)
    else:
        from fedbench.suggest import did_you_mean

        choices = (
            "tables",
            "ablations",
            "algorithms",
            "datasets",
            "models",
            "partitions",
            "figures",
        )
        raise FedbenchError(
            f"cannot list {what!r};{did_you_mean(what, choices)} choose {', '.join(choices)}"
        )


def _show_algorithm(name: str) -> None:
    """Every hyperparameter of algorithm NAME: type, default, range and meaning."""
    from fedbench.algorithms import ALGORITHMS
    from fedbench.fields import field_rows

    cls = ALGORITHMS.get(name)
    console.print(
        f"{name}: {cls.paper}\n{_first_line(cls.__doc__)}\n"
        f"upload per client and round: {cls.comm_up_label}; per-client state: "
        f"{cls.client_state_desc}",
        highlight=False,
        soft_wrap=True,
    )
    rows = field_rows(cls.Params, skip=("name",))
    _list_table(
        f"{name} hyperparameters (--set algorithm.FIELD=VALUE)",
        ["field", "type", "default", "range", "meaning"],
        [[r.name, r.type, r.default, r.range, r.meaning] for r in rows],
    )


def main() -> None:
    """Console entry point: user errors become one line on stderr and exit code 2.

    Typer's own usage errors (unknown option, missing argument) also exit with code 2, and so
    does a full or read-only disk (one line, fedbench.os_errors).
    """
    try:
        app()
    except FedbenchError as exc:
        prefix = "" if isinstance(exc, Interrupted) else "error: "
        err_console.print(f"{prefix}{exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except OSError as exc:  # a full or read-only disk: one line (fedbench.os_errors)
        from fedbench.os_errors import disk_error_line

        line = disk_error_line(exc)
        if line is None:
            raise
        err_console.print(f"error: {line}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(FedbenchError.exit_code)
