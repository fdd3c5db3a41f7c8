"""How long a plan would train, from measured speeds, never from a FLOP count.

`--dry-run` reads the measurements of every device fedbench knows (fedbench.runner.measured: the
files shipped in fedbench/runner/measurements/ and the current folder's benchmarks/results/)
and prints, per device, the hours of the plan's unfinished runs, one run at a time, evaluation
not included:

    seconds = its client steps / the client steps per second measured for its workload,

the rates being `fedbench bench --suite table1`'s: FedAdamW on ResNet-18 (BN) and ViT-Tiny with
3x32x32 images at B 50, per engine and precision. They apply to a run of that model on
CIFAR-sized data at that batch size, engine, precision and compile setting; FedAdamW's rate
stands for every algorithm (the step is the model's forward and backward; the rules differ by
elementwise updates), and ResNet-18's BN row for its GroupNorm variant (the DP tables' model),
which the line says. A private run (per-sample clipping) is estimated apart: the non-private
rate divided by the private / non-private step ratio measured on the device for the model
(benchmarks/dp_ratio.py; on a CPU without its own ratios, another CPU's), with the clipping
method the run uses (`auto`: the one auto ended on, else bk, ghost, vmap). Client-level privacy
clips whole updates and costs a non-private step.

Runs that no figure covers are counted and described, never guessed; a device's figures marked
`"representative": false` (a CPU suite measured above one runnable job per core) are named, not
read. `--estimate` measures the plan here instead (fedbench.runner.probe, at most about a
minute): set-up, rounds and evaluation, on the threads a sweep's worker would get, and with the
sweep's workers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fedbench.config import RunConfig
from fedbench.engine.run_folder import RunFolder
from fedbench.errors import FedbenchError
from fedbench.runner.measured import (
    RESULTS_DIR,
    Figures,
    Ratio,
    Ratios,
    all_figures,
    all_ratios,
    load_figures,
)
from fedbench.runner.probe import probe_config, suite_engine
from fedbench.runner.sweep_progress import duration, workload_key, workloads_first
from fedbench.runner.table_config import Plan, PlannedRun

__all__ = [
    "RESULTS_DIR",
    "duration",
    "estimate_lines",
    "load_figures",
    "match",
    "probe_config",
    "suite_engine",
]

#: The datasets of the suite's input shape (3x32x32 images, as its random data).
SUITE_DATA = ("cifar10", "cifar100")

#: run -> (its seconds, the label of its rate) or (None, why there is none).
SecondsOf = Callable[[PlannedRun], tuple[float | None, str]]


def this_device(cfg: RunConfig) -> str:
    """The name of the device cfg's runs would train on here ('CPU AMD EPYC', 'NVIDIA H100')."""
    from fedbench.engine.setup import resolve_device
    from fedbench.runner.bench_suite import device_name

    return device_name(resolve_device(cfg.runtime.device))


def figures_path(device: str, results: Path = RESULTS_DIR) -> Path:
    """The file `fedbench bench --suite` writes for the device."""
    from fedbench.runner.bench_suite import slug

    return results / f"{slug(device)}.json"


def _workload(cfg: RunConfig) -> tuple[str | None, str]:
    """The suite workload measuring cfg's model, and a note when it stands in for it."""
    from fedbench.runner.bench_suite import WORKLOADS

    if cfg.model.pretrained or cfg.model.lora is not None:
        return None, ""
    for name, model in WORKLOADS.items():
        if all(getattr(cfg.model, k) == v for k, v in model.items()):
            return name, ""
    if cfg.model.name == "resnet18":  # the DP tables' GroupNorm ResNet-18: the BN row's step
        return "resnet18_bn", f" (for norm {cfg.model.norm})"
    return None, ""


def _graphs_agree(measured: str, asked: str) -> bool:
    """A row measured with `runtime.cuda_graphs` on (or off) stands only for runs that do not ask
    for the other; `auto` on either side agrees (the suite lists the graphed row first)."""
    return "auto" in (measured, asked) or measured == asked


def match(cfg: RunConfig, rows: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str]:
    """The suite row measuring cfg's (non-private) client step, or (None, why none does)."""
    workload, _ = _workload(cfg)
    if workload is None:
        return None, f"model {cfg.model.name}"
    if cfg.data.name not in SUITE_DATA or cfg.data.image_size is not None:
        return None, f"data {cfg.data.name}"
    rt = cfg.runtime
    engine = suite_engine(cfg)
    for row in rows:
        if "client_steps_per_s" not in row:  # a row that failed or timed out measures nothing
            continue
        if (
            row.get("workload") == workload
            and row.get("engine_requested", row.get("engine")) == engine
            and row.get("precision") == rt.precision
            and bool(row.get("compile")) == rt.compile
            and _graphs_agree(row.get("cuda_graphs_requested", "auto"), rt.cuda_graphs)
        ):
            if row.get("batch_size") != cfg.fl.batch_size:
                return None, f"B {cfg.fl.batch_size} (measured at B {row.get('batch_size')})"
            return row, ""
    compiled = " compiled" if rt.compile else ""
    return None, f"{workload} {engine} {rt.precision}{compiled} (not measured)"


def private_ratio(cfg: RunConfig, figures: Figures, ratios: list[Ratios]) -> Ratio | None:
    """The private / non-private step ratio for cfg's model on the figures' device (on a CPU
    without its own, another CPU's)."""
    assert cfg.privacy is not None
    mine = [r for r in ratios if r.device == figures.device]
    if figures.is_cpu:
        mine += [r for r in ratios if r.device != figures.device and r.device.startswith("CPU")]
    lora = cfg.model.lora is not None
    for file in mine:
        found = file.ratio(cfg.model.name, lora, cfg.fl.batch_size, cfg.privacy.clipping)
        if found is not None:
            return found
    return None


def figures_rate(
    cfg: RunConfig, figures: Figures, ratios: list[Ratios]
) -> tuple[float | None, str]:
    """cfg's client steps per second on the figures' device, with its label (or None, why)."""
    row, why = match(cfg, figures.rows)
    if row is None:
        return None, why
    _, stand_in = _workload(cfg)
    engine = row.get("engine_requested", row.get("engine"))
    label = f"{row['workload']}{stand_in} {engine} {row['precision']}"
    rate = float(row["client_steps_per_s"])
    if cfg.privacy is None or cfg.privacy.level == "client":
        return rate, label
    ratio = private_ratio(cfg, figures, ratios)
    if ratio is None:
        return None, f"privacy (no private/non-private ratio measured for {cfg.model.name})"
    return rate / ratio.value, f"{label} private {ratio.label()}"


# --- the estimate ---------------------------------------------------------------------------


def _pending(plan: Plan, out: Path | None) -> list[PlannedRun]:
    runs = {r.run_id: r for r in plan.runs}
    return [
        r
        for r in runs.values()
        if out is None or not RunFolder.for_config(out, r.cfg).is_finished()
    ]


def makespan(seconds: list[float], slots: int, start: float = 0.0) -> float:
    """The wall time of runs of these durations on `slots` workers that start in `start`
    seconds, each run to the first free worker in the order given (the launcher's queue)."""
    free = [start] * max(1, slots)
    for s in seconds:
        free[free.index(min(free))] += s
    return max(free)


def _summarise(
    runs: list[PlannedRun], seconds_of: SecondsOf, head: str, what: str, none_line: str
) -> tuple[list[str], list[float]]:
    """The estimate's first line (`head`: its time, ...) and the runs it could not estimate;
    and each estimated run's seconds."""
    per_run: list[float] = []
    private = {"runs": 0, "seconds": 0.0}
    steps = 0
    used: dict[str, None] = {}
    unmatched: dict[str, int] = {}
    for run in runs:
        seconds, label = seconds_of(run)
        if seconds is None:
            unmatched[label] = unmatched.get(label, 0) + 1
            continue
        per_run.append(seconds)
        steps += run.client_steps()
        used[label] = None
        if run.cfg.privacy is not None:
            private["runs"] += 1
            private["seconds"] += seconds
    covered = len(per_run)
    if covered:
        total = sum(per_run)
        split = ""
        if private["runs"]:
            split = f"; private runs {duration(private['seconds'])} ({private['runs']} runs)"
            if covered > private["runs"]:
                split += (
                    f", non-private {duration(total - private['seconds'])} "
                    f"({covered - private['runs']} runs)"
                )
        lines = [
            f"{head}: {duration(total)} of training for {covered} of {len(runs)} runs to train "
            f"({steps:,} client steps, one run at a time, {what}){split} at " + "; ".join(used)
        ]
    else:
        lines = [none_line]
    if unmatched:
        text = ", ".join(f"{n} with {why}" for why, n in unmatched.items())
        lines.append(f"  not estimated: {text}" if covered else f"  runs: {text}")
    return lines, per_run


def _figures_lines(
    runs: list[PlannedRun], head: str, figures: Figures, ratios: list[Ratios]
) -> list[str]:
    def seconds_of(run: PlannedRun) -> tuple[float | None, str]:
        rate, label = figures_rate(run.cfg, figures, ratios)
        if rate is None:
            return None, label
        return run.client_steps() / rate, f"{label}: {rate:.3g} client steps/s"

    lines, _ = _summarise(
        runs,
        seconds_of,
        head,
        "evaluation not included",
        f"{head}: none; {figures.path} measures FedAdamW on ResNet-18 (BN) and ViT-Tiny with "
        "3x32x32 images, and no run of this plan is such a workload (--estimate measures them)",
    )
    lines.insert(1, f"  source: {figures.source()}; FedAdamW's rate for every algorithm")
    return lines


def _this_device_lines(
    runs: list[PlannedRun], device: str, figures: Figures | None, ratios: list[Ratios], path: Path
) -> list[str]:
    if figures is None or not figures.representative:
        why = (
            f"{path} does not exist"
            if figures is None
            else f"{figures.path} is marked unrepresentative"
            + (f" ({figures.data['note']})" if figures.data.get("note") else "")
        )
        return [
            f"estimate: none; no measurement for this device ({device}): use --estimate (a probe "
            "of this plan's workloads here, at most about a minute), or measure them with "
            "`fedbench bench --suite table1` on an otherwise idle machine (it writes "
            f"{path}); {why}"
        ]
    return _figures_lines(runs, "estimate", figures, ratios)


def _other_device_lines(
    runs: list[PlannedRun], figures: Figures, ratios: list[Ratios]
) -> list[str]:
    head = f"estimate on {figures.device} ({figures.when()})"
    if not figures.representative:
        note = f" ({figures.data['note']})" if figures.data.get("note") else ""
        return [f"{head}: none; {figures.path} is marked unrepresentative{note}"]
    return _figures_lines(runs, head, figures, ratios)


def _probe_lines(
    runs: list[PlannedRun],
    device: str,
    log: Callable[[str], None] | None,
    slots: int,
    threads: int | None,
) -> list[str]:
    from fedbench.runner.probe import Probe

    probe = Probe(runs, log, threads=threads, workers=slots)
    # In the launcher's order (the first run of each workload first), for the makespan.
    runs = workloads_first(runs, [workload_key(run.cfg) for run in runs])
    lines, per_run = _summarise(
        runs,
        probe.seconds_of,
        "estimate",
        "set-up and evaluation included",
        "estimate: none; no workload of this plan could be probed",
    )
    if per_run and slots > 1:
        start = probe.worker_start_s or 0.0
        started = f", each worker started in {start:.2g} s" if probe.worker_start_s else ""
        lines.insert(
            1,
            f"  with the sweep's {slots} workers: {duration(makespan(per_run, slots, start))} "
            f"(runs side by side, each worker on its share of the cores or on its GPU{started})",
        )
    lines += probe.source(device)
    return lines


def estimate_lines(
    plan: Plan,
    out: Path | None,
    *,
    probe: bool = False,
    results: Path = RESULTS_DIR,
    log: Callable[[str], None] | None = None,
    slots: int = 1,
    threads: int | None = None,
) -> list[str]:
    """The dry run's estimate: from this device's measurements and then every other device's
    (or, with `probe`, from a probe here on `threads` torch threads, for a sweep of `slots`
    workers side by side), or why there is none and how to get one."""
    pending = _pending(plan, out)
    if not pending:
        return ["estimate: nothing to train (every run is finished)"]
    try:
        device = this_device(pending[0].cfg)
    except FedbenchError as exc:  # runtime.device cuda, planned on a machine without a GPU
        device, here = None, [f"estimate: none; {exc}"]
    if probe:
        if device is None:
            return here
        return _probe_lines(pending, device, log, slots, threads)
    known = all_figures(results)
    ratios = all_ratios(results)
    lines = []
    if device is not None:
        path = figures_path(device, results)
        lines = _this_device_lines(pending, device, known.pop(device, None), ratios, path)
    else:
        lines = here
    for figures in known.values():
        lines += _other_device_lines(pending, figures, ratios)
    return lines
