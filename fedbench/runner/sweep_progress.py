"""A sweep's progress: runs done / running / failed and an ETA, as a rich bar on a terminal or
one line per finished run otherwise (the local and the Ray launcher, and figures' runs).

The ETA is fedbench's own, from the measured wall times of the runs that trained here (rich's
remaining-time column extrapolated from the last few updates and read 0:00:35 with minutes
left). Runs finished by an earlier sweep count apart ("already done"). Given the plan's runs,
the ETA is per workload (fedbench.runner.probe.probe_key: model, data, batch size, runtime,
privacy): a run left costs its client steps at the seconds per client step that the finished
runs of its workload took, and no ETA is shown while a workload left has no finished run. One
mean over every run (the ETA before) said "eta 7 min" on the first line of `make demo`, whose
160 runs took 2 min 18 s: its first runs train the CNN, half of its runs a logistic regression
some 3x faster per run. The launchers start the first run of each workload first
(`workloads_first`), so that the ETA appears after a few runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from fedbench.report.ran import cell_label

if TYPE_CHECKING:
    from fedbench.config import RunConfig
    from fedbench.runner.outcome import Outcome
    from fedbench.runner.table_config import PlannedRun


def workload_key(cfg: RunConfig) -> str:
    """What sets the cost of a run's client step (the probe's key: `--estimate` measures one
    run per key)."""
    from fedbench.runner.probe import probe_key

    return probe_key(cfg)


def duration(seconds: float) -> str:
    """'41.3 h', '12 min', '2 min 18 s', '40 s' (seconds shown under 10 minutes, where a
    minute is a large part of the whole)."""
    if seconds >= 3600:
        return f"{seconds / 3600:,.1f} h"
    if seconds >= 600:
        return f"{seconds / 60:.0f} min"
    if seconds >= 60:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} min" + (f" {rest} s" if rest else "")
    return f"{seconds:.0f} s"


T = TypeVar("T")


def workloads_first(tasks: Sequence[T], keys: Sequence[str]) -> list[T]:
    """`tasks` (with their workload `keys`) with the first task of each workload moved to the
    front, the others in their order: each workload's cost is measured early."""
    seen: set[str] = set()
    first: list[T] = []
    rest: list[T] = []
    for task, key in zip(tasks, keys, strict=True):
        (rest if key in seen else first).append(task)
        seen.add(key)
    return first + rest


class SweepProgress:
    """Runs done / running / failed and an ETA (module docstring): a rich bar on a terminal,
    one line per finished run otherwise. With `runs` (the sweep's runs, one per run id), the
    ETA is per workload; without, from the mean wall time of the runs trained."""

    def __init__(
        self,
        console: Console | None,
        total: int,
        workers: int,
        label: str,
        runs: Sequence[PlannedRun] | None = None,
    ) -> None:
        self.console, self.total, self.workers, self.label = console, total, workers, label
        self.done = self.failed = self.cached = 0
        #: Seconds spent on runs that trained: the ETA's rate ignores already-finished runs.
        self.trained_s = 0.0
        #: run id -> (its workload, its client steps), for the runs not finished yet.
        self.left: dict[str, tuple[str, int]] | None = None
        if runs is not None:
            self.left = {r.run_id: (workload_key(r.cfg), r.client_steps()) for r in runs}
        #: workload -> [seconds, client steps] of its runs that trained here.
        self.spent: dict[str, list[float]] = {}
        self.running: int | None = None  # set by launchers that know; else estimated
        self.rich: Progress | None = None
        if console is not None and console.is_terminal:
            self.rich = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[counts]}"),
                TimeElapsedColumn(),
                console=console,
            )
            self.rich.start()
            self.task = self.rich.add_task(label, total=total, counts=self._counts())

    def _counts(self) -> str:
        """'runs: 4 of 18 to train done, 2 running, 0 failed; 16 already done; eta 2 min'."""
        running = self.running
        if running is None:
            running = min(self.workers, self.total - self.done)
        to_train = self.total - self.cached
        cached = f"; {self.cached} already done" if self.cached else ""
        eta = self.eta()
        return (
            f"runs: {self.done - self.cached} of {to_train} to train done, {running} running, "
            f"{self.failed} failed{cached}" + (f"; {eta}" if eta else "")
        )

    def eta(self) -> str:
        """'eta 2 min': the seconds of the runs left over the workers; empty when none trained
        or none is left (a rerun of finished runs has no rate to extrapolate), or (per
        workload) while a workload left has no run trained."""
        trained = self.done - self.cached
        left = self.total - self.done
        if trained == 0 or left == 0:
            return ""
        if self.left is None:
            seconds = self.trained_s / trained * left
        else:
            rates = {key: s / max(steps, 1) for key, (s, steps) in self.spent.items()}
            if not self.left or any(key not in rates for key, _ in self.left.values()):
                return ""
            seconds = sum(rates[key] * steps for key, steps in self.left.values())
        return f"eta {duration(seconds / min(self.workers, left))}"

    def set_running(self, running: int) -> None:
        self.running = running
        if self.rich is not None:
            self.rich.update(self.task, counts=self._counts())

    def retrying(self, run: PlannedRun, outcome: Outcome) -> None:
        """A run failed (or its worker died) and starts again from its checkpoint."""
        if self.console is None:
            return
        where = cell_label(run.setting, run.cfg.to_dict())
        self.console.print(
            f"{run.method} {where} seed {run.seed}: {outcome.status}: {outcome.error}; "
            "retrying once from its checkpoint",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )

    def update(self, run: PlannedRun, outcome: Outcome) -> None:
        """A planned run finished: its row, column and seed name it."""
        where = cell_label(run.setting, run.cfg.to_dict())
        self.finished(f"{run.method} {where} seed {run.seed}", outcome)

    def _count(self, outcome: Outcome) -> None:
        """The finished run's seconds, for the ETA."""
        done = None if self.left is None else self.left.pop(outcome.run_id, None)
        if outcome.cached:
            return
        seconds = outcome.wall_s / outcome.together  # a run trained with others: its share
        self.trained_s += seconds
        if done is not None:
            key, steps = done
            spent = self.spent.setdefault(key, [0.0, 0])
            spent[0] += seconds
            spent[1] += steps

    def finished(self, what: str, outcome: Outcome) -> None:
        """A run finished (`what` names it): the bar moves, or one line off a terminal."""
        self.done += 1
        self.failed += outcome.status in ("failed", "diverged")
        self.cached += outcome.cached
        self._count(outcome)
        if self.rich is not None:
            # A finished run leaves the bar's total instead of completing in no time.
            total = self.total - self.cached
            self.rich.update(
                self.task, total=total, completed=self.done - self.cached, counts=self._counts()
            )
            return
        if self.console is None:
            return
        acc = f" test_acc {outcome.test_acc:.2f}" if outcome.test_acc is not None else ""
        note = " (already done)" if outcome.cached else f" in {outcome.wall_s:.0f} s"
        note += f" on node {outcome.node}" if outcome.node else ""
        reason = f": {outcome.error}" if outcome.status != "completed" and outcome.error else ""
        eta = self.eta()
        self.console.print(
            f"[{self.done}/{self.total} runs] {what}: {outcome.status}{note}{acc}{reason}"
            + (f"; {eta}" if eta else ""),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )

    def close(self) -> None:
        if self.rich is not None:
            self.rich.stop()
