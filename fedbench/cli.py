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
# Off a terminal (logs, CI) rich would wrap at 80 columns; tables read better wider.
console = Console(width=None if sys.stdout.isatty() else 160)
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
        str, typer.Option("--kind", help="auto | tensor | hessian | dp_paper | global")
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


def _first_line(doc: str | None) -> str:
    lines = (doc or "").strip().splitlines()
    return lines[0] if lines else ""


PresetOption = Annotated[
    str | None, typer.Option("--preset", help="A named preset of the table, e.g. quick.")
]
SeedsOption = Annotated[
    int | None, typer.Option("--seeds", help="Run the first N seeds of the table.")
]
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
LauncherOption = Annotated[str, typer.Option("--launcher", help="local (ray: not available yet).")]
TunedOption = Annotated[
    Path | None,
    typer.Option(
        "--tuned",
        help="A tuned.yaml from `fedbench tune`: each cell runs at its tuned values "
        "(report in OUT/<table>[-<preset>]-tuned/).",
    ),
]


def _sweep(
    kind: str,
    name: str,
    preset: str | None,
    seeds: int | None,
    methods: str | None,
    set_: list[str] | None,
    out: Path,
    workers: int | None,
    dry_run: bool,
    launcher: str,
    tuned_file: Path | None = None,
) -> None:
    from fedbench.report import build_report
    from fedbench.runner.sweep import make_plan, plan_table_view, run_sweep
    from fedbench.runner.table_config import load_table
    from fedbench.runner.tune import load_tuned

    if launcher != "local":
        raise FedbenchError(f"--launcher {launcher} is not available yet; use --launcher local")
    if workers is not None and workers < 1:
        raise FedbenchError("--workers must be at least 1")
    rows = [m.strip() for m in methods.split(",") if m.strip()] if methods else None
    table_kind = "ablation" if kind == "ablate" else "table"
    tuned = load_tuned(tuned_file, load_table(name, table_kind)) if tuned_file else None
    plan = make_plan(
        name,
        table_kind,
        preset=preset,
        seeds=seeds,
        methods=rows,
        overrides=set_ or [],
        tuned=tuned,
    )
    if dry_run:
        from fedbench.runner.preflight import require_resources

        checked = require_resources(plan, out)  # the same check as a real sweep: exit 2 if not
        console.print(plan_table_view(plan))
        unique = len({r.run_id for r in plan.runs})
        console.print(
            f"{len(plan.runs)} runs ({unique} distinct), {plan.client_steps():,} client steps "
            f"(local steps summed over clients and rounds); outputs: {out / plan.name}",
            highlight=False,
        )
        console.print(checked.found_line(), highlight=False, soft_wrap=True)
        return
    result = run_sweep(plan, out, workers=workers, console=console)
    report = build_report(result.folder, out / "runs")
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
    launcher: LauncherOption = "local",
    tuned: TunedOption = None,
) -> None:
    """Every (row, column, seed) run of a paper table, then its report in OUT/<table>[-<preset>]/."""
    _sweep("run", table, preset, seeds, methods, set_, out, workers, dry_run, launcher, tuned)


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
    launcher: LauncherOption = "local",
    tuned: TunedOption = None,
) -> None:
    """The same as `run` for an ablation table."""
    _sweep("ablate", name, preset, seeds, methods, set_, out, workers, dry_run, launcher, tuned)


@app.command()
def tune(
    table: Annotated[
        str, typer.Argument(help="A table or ablation name, or a table config's path.")
    ],
    space: Annotated[
        list[str] | None,
        typer.Option("--space", help="A searched field, KEY=log:LOW:HIGH (or uniform:, int:)."),
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
    for name in ("method", "column", "best values", "val test_acc", "done/pruned/failed"):
        view.add_column(name, overflow="fold")
    for method, col, values, score, done, pruned, failed in result.rows:
        shown = ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items()
        )
        view.add_row(method, col, shown or "-", f"{score:.2f}", f"{done}/{pruned}/{failed}")
    console.print(view)
    tuned_file = result.folder / "tuned.yaml"
    how = (
        f"`fedbench {command} {table} {'--preset ' + preset + ' ' if preset else ''}"
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
) -> None:
    """Rebuild a table folder's report (summary.csv, table.*, curves.png) from its runs."""
    from fedbench.report import build_report

    result = build_report(target, paper_numbers=paper_numbers)
    console.print(result.rich)
    console.print(
        "wrote " + ", ".join(str(f) for f in result.files), highlight=False, soft_wrap=True
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
    csv: Annotated[bool, typer.Option("--csv", help="Print CSV instead of a table.")] = False,
) -> None:
    """List run folders: status, the settings that tell them apart, final metrics."""
    from fedbench.report.runs import as_text, list_runs

    frame = list_runs(directory, where or [])
    if csv:
        print(frame.to_csv(index=False), end="")
        return
    columns, rows = as_text(frame.drop(columns=["folder"], errors="ignore"))
    _list_table(f"runs in {directory}: {len(frame)}", columns, rows)


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
        Path | None, typer.Argument(help="A YAML run config with a privacy section.")
    ] = None,
    set_: SetOption = None,
    client_size: Annotated[
        int | None,
        typer.Option(
            "--client-size",
            help="Samples per client, skipping the data (e.g. CIFAR-10 / 50 clients = 1000).",
        ),
    ] = None,
) -> None:
    """Print the epsilon a private config will spend (or the sigma calibrated to its target)."""
    from fedbench.config import load_run_config
    from fedbench.privacy.report import describe_privacy

    cfg = load_run_config(config, set_ or [])
    console.print(describe_privacy(cfg, client_size), highlight=False, soft_wrap=True)


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
        str, typer.Argument(help="tables | ablations | algorithms | datasets | models")
    ] = "algorithms",
) -> None:
    """List what fedbench knows by name."""
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
    else:
        raise FedbenchError(
            f"cannot list {what!r}; choose tables, ablations, algorithms, datasets or models"
        )


def main() -> None:
    """Console entry point: user errors become one line on stderr and exit code 2.

    Typer's own usage errors (unknown option, missing argument) also exit with code 2.
    """
    try:
        app()
    except FedbenchError as exc:
        err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
