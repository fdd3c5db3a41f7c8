"""Progress of one run: a rich bar on a terminal, plain periodic lines otherwise."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from fedbench.privacy.status import short_label


class RunProgress(Protocol):
    def start(self, total: int, done: int) -> None: ...
    def advance(self, round_done: int, metrics: dict[str, Any] | None) -> None: ...
    def close(self) -> None: ...


class SilentProgress:
    def start(self, total: int, done: int) -> None:
        pass

    def advance(self, round_done: int, metrics: dict[str, Any] | None) -> None:
        pass

    def close(self) -> None:
        pass


class PlainProgress:
    """Off a terminal (logs, CI): a line per evaluation (round, accuracy, losses, seconds per
    round, ETA), and between evaluations a short line per round at most every `every_s` seconds,
    so a log shows life during long evaluation intervals without one line per round."""

    def __init__(
        self,
        console: Console,
        label: str,
        every_s: float = 10.0,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.console, self.label, self.every_s, self.clock = console, label, every_s, clock

    def start(self, total: int, done: int) -> None:
        self.total, self.first = total, done
        self.t0 = self.last_line = self.clock()

    def advance(self, round_done: int, metrics: dict[str, Any] | None) -> None:
        now = self.clock()
        if metrics is None and now - self.last_line < self.every_s:
            return
        self.last_line = now
        per_round = (now - self.t0) / max(round_done - self.first, 1)
        eta = per_round * (self.total - round_done)
        scores = (
            f"test_acc {metrics['test_acc']:.2f}  test_loss {metrics['test_loss']:.4f}  "
            f"train_loss {metrics['train_loss']:.4f}  "
            if metrics is not None
            else ""
        )
        self.console.print(
            f"{self.label} round {round_done}/{self.total}  {scores}"
            f"{per_round:.2f} s/round  eta {eta:.0f} s",
            highlight=False,
            soft_wrap=True,
        )

    def close(self) -> None:
        pass


class RichProgress:
    def __init__(self, console: Console, label: str) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("round {task.completed}/{task.total}"),
            TextColumn("acc {task.fields[acc]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self.label = label

    def start(self, total: int, done: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task(self.label, total=total, completed=done, acc="-")

    def advance(self, round_done: int, metrics: dict[str, Any] | None) -> None:
        fields: dict[str, Any] = {"acc": f"{metrics['test_acc']:.2f}"} if metrics else {}
        self.progress.update(self.task, completed=round_done, **fields)

    def close(self) -> None:
        self.progress.stop()


def make_progress(console: Console | None, label: str) -> RunProgress:
    if console is None:
        return SilentProgress()
    return RichProgress(console, label) if console.is_terminal else PlainProgress(console, label)


def _fmt(value: object, spec: str) -> str:
    return format(value, spec) if isinstance(value, int | float) else "-"


def final_line(summary: dict[str, Any]) -> str:
    """A finished run's scores, rounded for reading (the run folder keeps full precision)."""
    final = summary.get("final") or {}
    parts = [
        f"test_acc {_fmt(final.get('test_acc'), '.2f')}",
        f"train_loss {_fmt(final.get('train_loss'), '.4f')}",
    ]
    if summary.get("epsilon") is not None:
        # Never an epsilon without its accounting status and direction (privacy.status).
        accounting = short_label(summary.get("privacy_accounting"))
        parts.append(
            f"epsilon {summary['epsilon']:.2f} (delta {summary.get('delta'):g}; {accounting})"
        )
    parts += [f"d {summary.get('d')}", f"wall {_fmt(summary.get('wall_s'), '.2f')} s"]
    return "  ".join(parts)
