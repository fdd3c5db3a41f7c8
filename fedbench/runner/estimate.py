"""How long a plan would train on this device, from measured client steps per second, never from a
FLOP count. Every unfinished run of the plan is estimated as

    seconds = its client steps / the client steps per second measured for its workload,

one run at a time, evaluation not included. The rates come from one of two sources, and the
estimate names it (device, engine, precision, when measured):

- the figures `fedbench bench --suite table1` wrote for this device
  (`benchmarks/results/<device>.json`): FedAdamW on ResNet-18 (BN) and ViT-Tiny with 3x32x32
  images at B 50, per engine and precision. They apply to a run of that model on CIFAR-sized
  data at that batch size, engine, precision and compile setting, without privacy; FedAdamW's
  rate stands for every algorithm (the step is the model's forward and backward; the rules differ
  by elementwise updates);
- a probe (`--estimate`): each distinct workload of the plan (model, data, batch size, runtime,
  privacy) trained here for one warm-up and one timed round of a few clients and local steps,
  on random data of the dataset's shape when it is an image dataset of known shape (so that no
  data is needed), else on the dataset itself.

Runs that no figure covers are counted and described, never guessed; with no figures for this
device, or figures marked `"representative": false` (a suite measured on a loaded machine:
`fedbench bench --suite` marks a CPU suite so when the load average exceeded the cores), the
estimate says "no measurement for this device" and how to get one.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.config import RunConfig, parse_run_config
from fedbench.engine.run_folder import RunFolder
from fedbench.errors import FedbenchError
from fedbench.runner.table_config import Plan, PlannedRun

#: Where `fedbench bench --suite` writes its figures (relative to the working directory).
RESULTS_DIR = Path("benchmarks/results")
#: The datasets of the suite's input shape (3x32x32 images, as its random data).
SUITE_DATA = ("cifar10", "cifar100")
#: Image datasets a probe replaces by random data of their shape: (C, H, W), classes.
PROBE_SHAPES = {
    "cifar10": ((3, 32, 32), 10),
    "cifar100": ((3, 32, 32), 100),
    "fmnist": ((1, 28, 28), 10),
    "tinyimagenet": ((3, 64, 64), 200),
}
#: A probe's round: at most this many clients, each at most this many local steps.
PROBE_CLIENTS = 2
PROBE_STEPS = 5

#: cfg -> (client steps per second, its label) or (None, why there is none).
RateOf = Callable[[RunConfig], tuple[float | None, str]]


@dataclass(frozen=True)
class Figures:
    """One device's suite results, as `fedbench bench --suite` wrote them."""

    path: Path
    data: dict[str, Any]

    @property
    def rows(self) -> list[dict[str, Any]]:
        return list(self.data.get("rows", []))

    @property
    def representative(self) -> bool:
        """False for a file marked `"representative": false` (measured on a loaded machine,
        say): no estimate reads its rates."""
        return self.data.get("representative", True) is not False

    def source(self) -> str:
        """Where the figures come from: device, torch, when, and how they were scaled."""
        when = self.data.get("measured_at") or "date not recorded in the file"
        parts = [
            f"{self.path} (`fedbench bench --suite {self.data.get('suite', 'table1')}`): "
            f"device {self.data.get('device', '?')}, torch {self.data.get('torch', '?')}, "
            f"measured: {when}"
        ]
        if self.data.get("scaled_down"):
            sets = ", ".join(self.data.get("overrides", []))
            parts.append(f"a scaled-down suite ({sets})")
        if self.data.get("note"):
            parts.append(f"its note: {self.data['note']}")
        return "; ".join(parts)

    def rate(self, cfg: RunConfig) -> tuple[float | None, str]:
        row, why = match(cfg, self.rows)
        if row is None:
            return None, why
        label = (
            f"{row['workload']} {row.get('engine_requested', row.get('engine'))} {row['precision']}"
        )
        return float(row["client_steps_per_s"]), label


def this_device(cfg: RunConfig) -> str:
    """The name of the device cfg's runs would train on here ('CPU AMD EPYC', 'NVIDIA H100')."""
    from fedbench.engine.bench_suite import device_name
    from fedbench.engine.setup import resolve_device

    return device_name(resolve_device(cfg.runtime.device))


def figures_path(device: str, results: Path = RESULTS_DIR) -> Path:
    """The file `fedbench bench --suite` writes for the device."""
    from fedbench.engine.bench_suite import slug

    return results / f"{slug(device)}.json"


def load_figures(path: Path) -> Figures | None:
    """The suite results in `path`, or None when there is no such file (or it is no suite)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        return None
    return Figures(path, data)


def _workload(cfg: RunConfig) -> str | None:
    from fedbench.engine.bench_suite import WORKLOADS

    for name, model in WORKLOADS.items():
        if all(getattr(cfg.model, k) == v for k, v in model.items()) and not cfg.model.pretrained:
            return name
    return None


def suite_engine(cfg: RunConfig) -> str:
    """The engine a run's step is measured with: `auto` is the sequential engine for every
    paper-size model (fedbench.engine.run.resolve_engine takes the vectorised one only for
    small compiled models on the CPU, which no suite row measures)."""
    return "sequential" if cfg.runtime.engine == "auto" else cfg.runtime.engine


def match(cfg: RunConfig, rows: list[dict[str, Any]]) -> tuple[dict[str, Any] | None, str]:
    """The suite row measuring cfg's client step, or (None, why none does)."""
    if cfg.privacy is not None:
        return None, "privacy (per-sample gradients)"
    workload = _workload(cfg)
    if workload is None:
        return None, f"model {cfg.model.name}"
    if cfg.data.name not in SUITE_DATA or cfg.data.image_size is not None:
        return None, f"data {cfg.data.name}"
    rt = cfg.runtime
    engine = suite_engine(cfg)
    for row in rows:
        if (
            row.get("workload") == workload
            and row.get("engine_requested", row.get("engine")) == engine
            and row.get("precision") == rt.precision
            and bool(row.get("compile")) == rt.compile
        ):
            if row.get("batch_size") != cfg.fl.batch_size:
                return None, f"B {cfg.fl.batch_size} (measured at B {row.get('batch_size')})"
            return row, ""
    compiled = " compiled" if rt.compile else ""
    return None, f"{workload} {engine} {rt.precision}{compiled} (not measured)"


# --- the probe ------------------------------------------------------------------------------


def _probe_key(cfg: RunConfig) -> str:
    """What sets the cost of a client step: model, data, batch size, runtime, privacy."""
    d = cfg.to_dict()
    runtime = {k: d["runtime"][k] for k in ("device", "precision", "compile", "engine")}
    key = [d["model"], d["data"], d["fl"]["batch_size"], runtime, d["privacy"]]
    return json.dumps(key, sort_keys=True)


def _random_images(path: Path, shape: tuple[int, ...], classes: int, n_train: int) -> None:
    rng = np.random.default_rng(0)
    np.savez(
        path,
        x_train=rng.standard_normal((n_train, *shape), dtype=np.float32),
        y_train=np.arange(n_train) % classes,
        x_test=rng.standard_normal((classes, *shape), dtype=np.float32),
        y_test=np.arange(classes),
    )


def probe_config(cfg: RunConfig, folder: Path) -> RunConfig:
    """cfg shrunk to a probe: two rounds of at most PROBE_CLIENTS clients x PROBE_STEPS steps,
    on random images of the dataset's shape (written to folder) where the shape is known."""
    d = cfg.to_dict()
    d["fl"].update(rounds=2, local_steps=min(cfg.fl.local_steps, PROBE_STEPS))
    d["runtime"]["checkpoint_every"] = 0
    if cfg.data.name in PROBE_SHAPES:
        shape, classes = PROBE_SHAPES[cfg.data.name]
        batch = cfg.fl.batch_size or 64
        path = folder / f"{cfg.data.name}.npz"
        # Every probe client holds two full batches; the partition does not change a step's cost.
        _random_images(path, shape, classes, max(2 * batch * PROBE_CLIENTS, classes))
        d["data"] = {"name": "npz", "path": str(path), "image_size": cfg.data.image_size}
        d["partition"] = {"kind": "iid", "clients": PROBE_CLIENTS}
        d["fl"]["participation"] = 1.0
    else:
        clients = cfg.partition.clients
        d["fl"]["participation"] = min(cfg.fl.participation, PROBE_CLIENTS / clients)
    return parse_run_config(d)


def probe_rate(cfg: RunConfig) -> float:
    """Client steps per second of cfg's workload here: one warm-up round, one timed round."""
    import torch

    from fedbench.engine.run import select_engine
    from fedbench.engine.schedule import local_lr
    from fedbench.engine.setup import prepare_run

    setup = prepare_run(cfg)

    def sync() -> None:
        if setup.device.type == "cuda":
            torch.cuda.synchronize(setup.device)

    with tempfile.TemporaryDirectory(prefix="fedbench-probe-") as tmp:
        engine = select_engine(setup, RunFolder(Path(tmp)), None)
        engine._round(0, local_lr(cfg.algorithm, 0, cfg.fl.rounds))
        sync()
        start = time.perf_counter()
        engine._round(1, local_lr(cfg.algorithm, 1, cfg.fl.rounds))
        sync()
        seconds = time.perf_counter() - start
    return len(setup.schedule[1]) * cfg.fl.local_steps / seconds


class Probe:
    """Rates measured now, one probe per distinct workload of the runs (`--estimate`)."""

    def __init__(self, runs: list[PlannedRun], log: Callable[[str], None] | None = None) -> None:
        self.rates: dict[str, tuple[float | None, str]] = {}
        self.when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        with tempfile.TemporaryDirectory(prefix="fedbench-probe-data-") as tmp:
            for run in runs:
                key = _probe_key(run.cfg)
                if key in self.rates:
                    continue
                cfg = probe_config(run.cfg, Path(tmp))
                label = (
                    f"{run.cfg.model.name}/{run.cfg.data.name} B {run.cfg.fl.batch_size} "
                    f"{suite_engine(run.cfg)} {run.cfg.runtime.precision}"
                    + (" private" if run.cfg.privacy is not None else "")
                )
                if log is not None:
                    log(f"probing {label} ({run.cfg.algorithm.name}) ...")
                try:
                    self.rates[key] = (probe_rate(cfg), label)
                except Exception as exc:  # a probe that fails says why; the plan stands
                    self.rates[key] = (None, f"{label}: the probe failed ({exc})")

    def rate(self, cfg: RunConfig) -> tuple[float | None, str]:
        return self.rates.get(_probe_key(cfg), (None, "not probed"))

    def source(self, device: str) -> str:
        return (
            f"a probe measured now on {device} ({self.when}): per workload, one warm-up and one "
            f"timed round of at most {PROBE_CLIENTS} clients x {PROBE_STEPS} local steps with "
            "the algorithm of its first run (standing for the others), on random images of the "
            "dataset's shape where it is known (a short probe: expect some noise)"
        )


# --- the estimate ---------------------------------------------------------------------------


def duration(seconds: float) -> str:
    """'41.3 h', '12 min', '40 s'."""
    if seconds >= 3600:
        return f"{seconds / 3600:,.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


def _pending(plan: Plan, out: Path | None) -> list[PlannedRun]:
    runs = {r.run_id: r for r in plan.runs}
    return [
        r
        for r in runs.values()
        if out is None or not RunFolder.for_config(out, r.cfg).is_finished()
    ]


def _summarise(runs: list[PlannedRun], rate_of: RateOf, source: str, none_line: str) -> list[str]:
    seconds, steps = 0.0, 0
    used: dict[str, float] = {}
    unmatched: dict[str, int] = {}
    for run in runs:
        rate, label = rate_of(run.cfg)
        if rate is None:
            unmatched[label] = unmatched.get(label, 0) + 1
            continue
        seconds += run.client_steps() / rate
        steps += run.client_steps()
        used[label] = rate
    covered = len(runs) - sum(unmatched.values())
    if covered:
        rates = "; ".join(f"{k}: {v:.3g} client steps/s" for k, v in used.items())
        lines = [
            f"estimate: {duration(seconds)} of training for {covered} of {len(runs)} runs to "
            f"train ({steps:,} client steps, one run at a time, evaluation not included) at "
            f"{rates}"
        ]
    else:
        lines = [none_line]
    lines.append(f"  source: {source}")
    if unmatched:
        what = ", ".join(f"{n} with {why}" for why, n in unmatched.items())
        lines.append(f"  not estimated: {what}" if covered else f"  runs: {what}")
    return lines


def estimate_lines(
    plan: Plan,
    out: Path | None,
    *,
    probe: bool = False,
    results: Path = RESULTS_DIR,
    log: Callable[[str], None] | None = None,
) -> list[str]:
    """The dry run's estimate (from this device's suite figures, or a probe when `probe`): its
    time and source, or why there is none and how to get one."""
    pending = _pending(plan, out)
    if not pending:
        return ["estimate: nothing to train (every run is finished)"]
    try:
        device = this_device(pending[0].cfg)
    except FedbenchError as exc:  # runtime.device cuda, planned on a machine without a GPU
        return [f"estimate: none; {exc}"]
    if probe:
        measured = Probe(pending, log)
        return _summarise(
            pending,
            measured.rate,
            measured.source(device),
            "estimate: none; no workload of this plan could be probed",
        )
    path = figures_path(device, results)
    figures = load_figures(path)
    if figures is None or not figures.representative:
        why = (
            f"{path} does not exist"
            if figures is None
            else f"{path} is marked unrepresentative"
            + (f" ({figures.data['note']})" if figures.data.get("note") else "")
        )
        return [
            f"estimate: none; no measurement for this device ({device}): use --estimate (a short "
            f"probe of this plan's workloads here), or measure them with `fedbench bench --suite "
            f"table1` on an otherwise idle machine (it writes {path}); {why}"
        ]
    return _summarise(
        pending,
        figures.rate,
        f"{figures.source()}; FedAdamW's rate for every algorithm",
        f"estimate: none; {path} measures FedAdamW on ResNet-18 (BN) and ViT-Tiny with 3x32x32 "
        "images, and no run of this plan is such a workload (--estimate measures them)",
    )
