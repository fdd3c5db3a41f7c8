"""`--estimate`: each distinct workload of a plan trained here for a few seconds, at most
PROBE_SECONDS for the whole plan, so that any machine answers within about a minute.

A workload (model, data, batch size, runtime, privacy: what sets a client step's cost) is probed
with the algorithm of its first run, on random images of the dataset's shape when it is an image
dataset of known shape (so no data is needed), else on the dataset itself, in three parts:

1. set-up: the run's set-up (data, partition, model, algorithm) timed, then a warm-up round of
   one client and one local step (first-call costs) and a second such round: the time of one
   step, per-round costs included;
2. rounds: the run's own round (its clients per round x its local steps) when two of them fit
   in what is left of the workload's share of the budget, else a round scaled down to fit
   (fewer local steps, then fewer clients; the estimate says so), one warm-up and then as many
   timed rounds as the share allows;
3. one evaluation (the test set, and the train subset the run evaluates).

A run then costs its set-up + its client steps at the timed rounds' seconds per client step +
its evaluations. Torch runs on the threads a sweep's worker would get (`threads`): on a shared
CPU a probe with every core's threads measured OpenMP threads spinning against other jobs, and
a private workload came out faster than its non-private twin (3.91 against 1.73 client steps/s,
each from one timed round of 10 steps).
"""

from __future__ import annotations

import json
import math
import select
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fedbench.config import RunConfig, parse_run_config
from fedbench.engine.run_folder import RunFolder
from fedbench.files import temporary_folder
from fedbench.runner.table_config import PlannedRun
from fedbench.threads import kept_thread_state

#: The whole probe's budget in seconds (each workload gets its share, at least MIN_SHARE_S).
PROBE_SECONDS = 60.0
MIN_SHARE_S = 3.0
#: Image datasets a probe replaces by random data of their shape: (C, H, W), classes, and the
#: sizes of their training and test sets (for the evaluation's cost).
PROBE_SHAPES = {
    "cifar10": ((3, 32, 32), 10, 50000, 10000),
    "cifar100": ((3, 32, 32), 100, 50000, 10000),
    "fmnist": ((1, 28, 28), 10, 60000, 10000),
    "tinyimagenet": ((3, 64, 64), 200, 100000, 10000),
}
#: Test images of a probe on random data: its evaluation is timed on these and scaled.
PROBE_TEST = 1000


def probe_key(cfg: RunConfig) -> str:
    """What sets the cost of a client step: model, data, batch size, runtime, privacy."""
    d = cfg.to_dict()
    runtime = {k: d["runtime"][k] for k in ("device", "precision", "compile", "engine")}
    key = [d["model"], d["data"], d["fl"]["batch_size"], runtime, d["privacy"]]
    return json.dumps(key, sort_keys=True)


def round_shape(cfg: RunConfig) -> tuple[int, int]:
    """(clients per round, local steps) of a run."""
    from fedbench.engine.schedule import clients_per_round

    return clients_per_round(cfg.fl.participation, cfg.partition.clients), cfg.fl.local_steps


def evaluations(cfg: RunConfig) -> int:
    """How often a run evaluates: round 0, every `eval.every` rounds, and the last round."""
    rounds, every = cfg.fl.rounds, cfg.eval.every
    return 1 + rounds // every + (rounds % every != 0)


def _random_images(
    path: Path, shape: tuple[int, ...], classes: int, n_train: int, n_test: int
) -> None:
    rng = np.random.default_rng(0)
    np.savez(
        path,
        x_train=rng.standard_normal((n_train, *shape), dtype=np.float32),
        y_train=np.arange(n_train) % classes,
        x_test=rng.standard_normal((n_test, *shape), dtype=np.float32),
        y_test=np.arange(n_test) % classes,
    )


def probe_config(
    cfg: RunConfig,
    folder: Path,
    clients: int = 2,
    steps: int = 5,
    processes: int | None = None,
) -> RunConfig:
    """cfg shrunk to a probe: rounds of `clients` clients x `steps` local steps (at most the
    run's), on random images of the dataset's shape (written to folder) where it is known;
    with `processes`, its clients train in that many processes (a sweep's worker: one)."""
    d = cfg.to_dict()
    real_clients, real_steps = round_shape(cfg)
    clients, steps = min(clients, real_clients), min(steps, real_steps)
    d["fl"].update(rounds=1000, local_steps=steps)
    d["runtime"]["checkpoint_every"] = 0
    if processes is not None:
        d["runtime"]["client_processes"] = processes
    if cfg.data.name in PROBE_SHAPES:
        shape, classes, _, n_test = PROBE_SHAPES[cfg.data.name]
        batch = cfg.fl.batch_size or 64
        path = folder / f"{cfg.data.name}-{clients}.npz"
        # Every probe client holds two full batches; the partition does not change a step's cost.
        n_train = max(2 * batch * clients, classes)
        _random_images(path, shape, classes, n_train, min(n_test, PROBE_TEST))
        d["data"] = {"name": "npz", "path": str(path), "image_size": cfg.data.image_size}
        d["partition"] = {"kind": "iid", "clients": clients}
        d["fl"]["participation"] = 1.0
    else:
        d["fl"]["participation"] = clients / cfg.partition.clients
    return parse_run_config(d)


#: A stand-in for a sweep's worker (`companions`): it starts as one does (Python, torch and
#: fedbench's engine imported), prints the seconds that took, then keeps its core busy.
_COMPANION = """import sys, time
start = time.perf_counter()
import fedbench.engine
print(time.perf_counter() - start, flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    pass
"""


class Companions:
    """`count` busy processes beside the probe, standing for a sweep's other workers: each
    worker of a sweep holds its share of the cores, and a probe alone in its process measured
    the cores the sweep's other workers would hold as its own (1.33x fast beside two busy loops
    on 2 cores, which the sweep's 2 workers and the loops share four ways). Each also measures
    a worker's start (the imports it pays before its first run), and ends by itself after
    `seconds`, and at `close` in any case."""

    def __init__(self, count: int, seconds: float) -> None:
        self.started = time.perf_counter()
        command = [sys.executable, "-c", _COMPANION, f"{seconds:.0f}"]
        self.processes = [
            subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
            for _ in range(count)
        ]

    def start_s(self) -> float | None:
        """A worker's start in seconds (the slowest stand-in's), None when there is none."""
        seconds = []
        for process in self.processes:
            assert process.stdout is not None
            # Its imports are done long before a probe's rounds are (else: what it took so far).
            left = max(0.0, 30.0 - (time.perf_counter() - self.started))
            ready, _, _ = select.select([process.stdout], [], [], left)
            line = process.stdout.readline() if ready else b""
            try:
                seconds.append(float(line))
            except ValueError:
                seconds.append(time.perf_counter() - self.started)
        return max(seconds, default=None)

    def close(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()


@dataclass
class Measured:
    """What a probe of one workload measured."""

    label: str
    setup_s: float
    step_s: float  # seconds per client step in the timed rounds
    shape: tuple[int, int]  # clients x local steps of a timed round
    rounds: int  # timed rounds
    eval_s: float
    scaled: bool  # the timed round is smaller than the run's

    def run_seconds(self, cfg: RunConfig, client_steps: int) -> float:
        # An evaluation the budget left no time for counts as nothing (the line says so).
        eval_s = 0.0 if math.isnan(self.eval_s) else self.eval_s
        return self.setup_s + client_steps * self.step_s + evaluations(cfg) * eval_s

    def describe(self) -> str:
        c, k = self.shape
        scaled = " (scaled down from the run's round)" if self.scaled else ""
        rounds = (
            f"over {self.rounds} round(s) of {c} client(s) x {k} step(s){scaled}"
            if self.rounds
            else "from the warm-up step alone (the budget allowed no more: an over-estimate)"
        )
        evaluation = (
            "not measured (no time left)" if math.isnan(self.eval_s) else f"{self.eval_s:.3g} s"
        )
        return (
            f"{self.label}: {1 / self.step_s:.3g} client steps/s {rounds}, set-up "
            f"{self.setup_s:.3g} s, evaluation {evaluation}"
        )


class _Trainer:
    """A probe run: its set-up and engine, rounds timed one by one."""

    def __init__(self, cfg: RunConfig, tmp: Path) -> None:
        from fedbench.engine.run import select_engine
        from fedbench.engine.setup import prepare_run

        start = time.perf_counter()
        tmp.mkdir(parents=True, exist_ok=True)
        self.cfg = cfg
        self.setup = prepare_run(cfg)
        self.engine = select_engine(self.setup, RunFolder(tmp), None)
        # The plan's CPU layout, as the run puts it in place: its threads and client processes.
        self.engine.start_layout()
        self.setup_s = time.perf_counter() - start
        self.next = 0

    def close(self) -> None:
        self.engine.close_layout()

    def _sync(self) -> None:
        import torch

        if self.setup.device.type == "cuda":
            torch.cuda.synchronize(self.setup.device)

    def round(self) -> float:
        """Train the next round; its seconds."""
        from fedbench.engine.schedule import local_lr

        start = time.perf_counter()
        self.engine._round(self.next, local_lr(self.cfg.algorithm, self.next, self.cfg.fl.rounds))
        self._sync()
        self.next += 1
        return time.perf_counter() - start

    def evaluation(self, real: RunConfig) -> float:
        """The seconds of one evaluation of the `real` run: timed here, scaled by the samples it
        evaluates when the probe's random data is smaller than the dataset."""
        start = time.perf_counter()
        self.engine._evaluate(self.next, 0.0, 0.0)
        self._sync()
        seconds = time.perf_counter() - start
        if real.data.name not in PROBE_SHAPES:
            return seconds  # the probe evaluated the dataset itself
        _, _, n_train, n_test = PROBE_SHAPES[real.data.name]
        subset = real.eval.train_subset
        evaluated = n_test + (min(subset, n_train) if subset else n_train)
        here = len(self.setup.data.y_test) + len(self.engine.train_eval_idx)
        return seconds * evaluated / here


def _real_setup_s(cfg: RunConfig) -> float | None:
    """The seconds of the run's own set-up (reading and partitioning its dataset, which random
    images skip: 2 s for Fashion-MNIST against 0.04 s) when the data is here; None when it is
    not (nothing is downloaded)."""
    from fedbench.engine.setup import prepare_run
    from fedbench.errors import FedbenchError

    d = cfg.to_dict()
    d["data"]["download"] = False
    start = time.perf_counter()
    try:
        prepare_run(parse_run_config(d))
    except (FedbenchError, OSError):
        return None
    return time.perf_counter() - start


def measure(
    cfg: RunConfig, label: str, share: float, tmp: Path, processes: int | None = None
) -> Measured:
    """Probe one workload within about `share` seconds (see the module docstring); with
    `processes`, its clients train in that many processes (`probe_config`)."""
    trainers = [_Trainer(probe_config(cfg, tmp, 1, 1, processes), tmp / "small")]
    try:
        return _measure(cfg, label, share, tmp, processes, trainers)
    finally:
        for trainer in trainers:
            trainer.close()


def _measure(
    cfg: RunConfig,
    label: str,
    share: float,
    tmp: Path,
    processes: int | None,
    trainers: list[_Trainer],
) -> Measured:
    real_clients, real_steps = round_shape(cfg)
    small = trainers[0]
    # The share counts from here: the first set-up pays one-time costs (imports, reading the
    # data) that a sweep pays once, and a first probe charged with them measured its workload
    # slower than the next one (a private workload "faster" than its non-private twin).
    start = time.perf_counter()

    def left() -> float:
        return share - (time.perf_counter() - start)

    step_s = small.round()  # the warm-up: an upper bound until a steady round is timed
    timed = 0
    if step_s < share:  # first calls make a warm-up far slower than a step: time one more
        step_s, timed = small.round(), 1
    # The evaluation on the same model and data (the sizes scaled), before the rounds use up
    # the share.
    eval_s = small.evaluation(cfg) if left() > 0 else math.nan
    if left() > eval_s:  # again: a first evaluation pays first calls too (a private run's
        eval_s = small.evaluation(cfg)  # accountant imported: 4 s against 0.1 s)
    trainer, clients, steps, seconds = small, 1, 1, step_s * max(timed, 1)
    if left() > 2 * step_s:
        # The run's round if a warm-up and a timed one fit in what is left, else scaled down.
        fit = int(left() / 2 / step_s)
        steps = min(real_steps, fit)
        clients = min(real_clients, max(1, fit // steps))
        if (clients, steps) != (1, 1):
            config = probe_config(cfg, tmp, clients, steps, processes)
            trainer = _Trainer(config, tmp / "probe")
            trainers.append(trainer)
            trainer.round()  # the warm-up of the new shape
            timed, seconds = 0, 0.0
        while timed == 0 or (left() > seconds / timed and timed < 100):
            seconds += trainer.round()
            timed += 1
    setup_s = _real_setup_s(cfg) if cfg.data.name in PROBE_SHAPES else None
    return Measured(
        label=label,
        # The run's own set-up (its data read, partitioned) where the data is here; else the
        # second set-up's time where there is one: the first paid the one-time costs.
        setup_s=setup_s if setup_s is not None else trainer.setup_s,
        step_s=seconds / max(timed, 1) / (clients * steps),
        shape=(clients, steps),
        rounds=timed,
        eval_s=eval_s,
        scaled=(clients, steps) != (real_clients, real_steps),
    )


def suite_engine(cfg: RunConfig) -> str:
    """The engine a run's step is measured with: the execution plan's executor for a model of
    the bench suite (fedbench.engine.plan.paper_executor: paper-size models, so `auto` is the
    sequential engine)."""
    from fedbench.engine.plan import paper_executor

    return paper_executor(cfg)


def workload_label(cfg: RunConfig) -> str:
    private = " private" if cfg.privacy is not None else ""
    return (
        f"{cfg.model.name}/{cfg.data.name} B {cfg.fl.batch_size} {suite_engine(cfg)} "
        f"{cfg.runtime.precision}{private}"
    )


def _warm_accountants(cfgs: list[RunConfig]) -> None:
    """Load each privacy accountant the runs use once, before any probe is timed: its first
    call imports it (4 s where an evaluation takes 0.1 s), a cost a sweep pays once, which a
    private workload's timed evaluation would otherwise carry into every run's estimate."""
    from fedbench.privacy.accounting import account, worst_epsilon

    for accountant in sorted({c.privacy.accountant for c in cfgs if c.privacy is not None}):
        worst_epsilon(1.0, [account(0.01, {1: 1})], 1.0e-5, accountant)


class Probe:
    """Per distinct workload of the runs, what a probe measured now (`--estimate`)."""

    def __init__(
        self,
        runs: list[PlannedRun],
        log: Callable[[str], None] | None = None,
        threads: int | None = None,
        budget: float = PROBE_SECONDS,
        workers: int = 1,
    ) -> None:
        """Probe the runs' workloads within about `budget` seconds, at `threads` torch threads
        (None: as the run's plan sets them); for a sweep of `workers` CPU workers side by side
        (each in its own process: its clients in that one), beside `workers - 1` busy
        processes of `threads` cores each (`companions`)."""
        self.measured: dict[str, Measured | str] = {}
        self.when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        self.threads = threads
        sweep = workers > 1 and threads is not None
        #: The busy processes that stood for the sweep's other workers.
        self.companions = (workers - 1) * (threads or 1) if sweep else 0
        firsts: dict[str, PlannedRun] = {}
        for run in runs:
            firsts.setdefault(probe_key(run.cfg), run)
        _warm_accountants([run.cfg for run in firsts.values()])
        start = time.perf_counter()
        others = Companions(self.companions, 2 * budget + 60)
        try:
            with kept_thread_state(threads), temporary_folder("fedbench-probe-") as tmp:
                for i, (key, run) in enumerate(firsts.items()):
                    # What is left of the budget, shared by the workloads left.
                    left = budget - (time.perf_counter() - start)
                    share = max(MIN_SHARE_S, left / (len(firsts) - i))
                    self.measured[key] = self._measure(run, share, tmp / str(i), sweep, log)
            #: The seconds a sweep's worker takes to start (None: the sweep trains here).
            self.worker_start_s = others.start_s()
        finally:
            others.close()
        self.seconds = time.perf_counter() - start

    @staticmethod
    def _measure(
        run: PlannedRun,
        share: float,
        folder: Path,
        sweep: bool,
        log: Callable[[str], None] | None,
    ) -> Measured | str:
        """One workload measured (or why not: a probe that fails says why; the plan stands)."""
        label = workload_label(run.cfg)
        if log is not None:
            log(f"probing {label} ({run.cfg.algorithm.name}) for at most {share:.0f} s ...")
        folder.mkdir()
        try:
            return measure(run.cfg, label, share, folder, 1 if sweep else None)
        except Exception as exc:
            return f"{label}: the probe failed ({exc})"

    def seconds_of(self, run: PlannedRun) -> tuple[float | None, str]:
        """A run's seconds, with the label of its workload (or None and why)."""
        measured = self.measured.get(probe_key(run.cfg), "not probed")
        if isinstance(measured, str):
            return None, measured
        rate = f"{measured.label}: {1 / measured.step_s:.3g} client steps/s"
        return measured.run_seconds(run.cfg, run.client_steps()), rate

    def source(self, device: str) -> list[str]:
        threads = f", {self.threads} torch thread(s)" if self.threads is not None else ""
        if self.companions:
            threads += f", beside {self.companions} busy process(es) for the sweep's other workers"
        if self.worker_start_s is not None:
            threads += f"; a worker starts in {self.worker_start_s:.2g} s"
        lines = [
            f"  source: a probe measured now on {device} ({self.when}{threads}, "
            f"{math.ceil(self.seconds)} s in all): per workload, with the algorithm of its first "
            "run standing for the others, on random images of the dataset's shape where it is "
            "known; a run = set-up + its client steps at the timed rate + its evaluations"
        ]
        lines += [
            f"  measured: {m.describe()}" for m in self.measured.values() if isinstance(m, Measured)
        ]
        return lines
