"""Run smoke cells (fedbench.runner.smoke.cells) and say, one line each, whether they trained.

Each distinct smoke config trains once, in a temporary folder (nothing is written to --out, so
no finished run can be mistaken for a real one); cells with the same smoke config share the
result. A cell fails when its run raises, fails or diverges; the line gives the one-line error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fedbench.files import temporary_folder
from fedbench.runner.smoke.cells import SmokeCell


@dataclass(frozen=True)
class SmokeOutcome:
    """One cell's result: ok, with the seconds its run took, or the error."""

    label: str
    ok: bool
    seconds: float
    error: str | None = None
    shared_with: str | None = None  # the cell whose identical run this one reused
    #: Refused up front with fedbench's own one-line error (as a sweep records "unsupported",
    #: e.g. an algorithm that fedbench does not implement): not a failure of the check.
    refused: bool = False

    def line(self) -> str:
        status = "n/a " if self.refused else "ok  " if self.ok else "FAIL"
        again = f" (same run as {self.shared_with})" if self.shared_with else ""
        detail = f": {self.error}" if self.error else ""
        return f"{status} {self.seconds:7.1f} s  {self.label}{again}{detail}"


def one_line(exc: BaseException) -> str:
    """An exception as one line: a FedbenchError's message, else 'TypeName: first line'."""
    from fedbench.errors import FedbenchError

    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if isinstance(exc, FedbenchError):
        return first
    return f"{type(exc).__name__}: {first}"[:400]


def train_cell(
    cell: SmokeCell, out: Path, save_model: bool = False
) -> tuple[bool, str | None, bool]:
    """Train one smoke run into `out` through the launcher's `run_one` (never raises): whether
    it completed, its error as one line, and whether it was refused up front (no summary
    written: what a sweep calls unsupported)."""
    from fedbench.runner.launcher import run_one

    outcome = run_one(cell.cfg.to_dict(), str(out), save_model=save_model)
    if outcome.status == "completed":
        return True, None, False
    lines = (outcome.error or "no detail").strip().splitlines()
    error = lines[0][:400] if lines else "no detail"
    if outcome.status == "unsupported":
        return False, error, True
    return False, error if outcome.status == "failed" else f"{outcome.status}: {error}", False


def run_cells(
    cells: list[SmokeCell],
    say: Callable[[str], None],
    out: Path | None = None,
    save_model: bool = False,
) -> list[SmokeOutcome]:
    """Train every distinct cell once (in `out`, default a temporary folder) and say one line
    per cell as it finishes."""
    outcomes: list[SmokeOutcome] = []
    seen: dict[str, SmokeOutcome] = {}
    with temporary_folder("fedbench-smoke-runs-") as tmp:
        folder = out or tmp
        for cell in cells:
            key = cell.cfg.config_hash()
            if key in seen:
                first = seen[key]
                outcome = SmokeOutcome(
                    cell.label,
                    first.ok,
                    0.0,
                    first.error,
                    shared_with=first.label,
                    refused=first.refused,
                )
            else:
                t0 = time.perf_counter()
                ok, error, refused = train_cell(cell, folder, save_model)
                outcome = SmokeOutcome(
                    cell.label, ok, time.perf_counter() - t0, error, refused=refused
                )
                seen[key] = outcome
            outcomes.append(outcome)
            say(outcome.line())
    return outcomes
