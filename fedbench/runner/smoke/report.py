"""What a smoke check reports: one outcome per cell, the header saying what ran where and what
was replaced, and the verdict (exit code 1 when any cell failed)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fedbench.runner.smoke.cells import SmokeCell
from fedbench.runner.smoke.run import SmokeOutcome


@dataclass
class SmokeReport:
    """The outcome of `--smoke`: one outcome per cell and the lines printed."""

    name: str
    outcomes: list[SmokeOutcome] = field(default_factory=list)
    seconds: float = 0.0
    #: A failure outside the cells (a figure's own computation after its runs).
    error: str | None = None

    @property
    def failed(self) -> list[SmokeOutcome]:
        return [o for o in self.outcomes if not o.ok and not o.refused]

    @property
    def refused(self) -> list[SmokeOutcome]:
        return [o for o in self.outcomes if o.refused]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed or self.error else 0

    def verdict(self) -> str:
        runs = sum(o.shared_with is None for o in self.outcomes)
        ok = len(self.outcomes) - len(self.failed) - len(self.refused)
        refused = f", {len(self.refused)} refused up front (n/a)" if self.refused else ""
        head = (
            f"smoke {self.name}: {ok}/{len(self.outcomes)} cells ok{refused} ({runs} distinct "
            f"runs) in {self.seconds:.1f} s"
        )
        if self.error:
            return f"{head}; FAIL after the runs: {self.error}"
        return head if not self.failed else f"{head}; {len(self.failed)} FAILED"


def _device() -> str:
    import torch

    if torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(0)})"
    return "cpu"


def header(name: str, cells: list[SmokeCell]) -> list[str]:
    """What the check runs, where, and every replacement any cell makes (each once)."""
    replaced: list[str] = []
    for cell in cells:
        replaced += [r for r in cell.replaced if r not in replaced]
    lines = [
        f"smoke {name}: {len(cells)} cells at paper settings (model, input shape, classes, "
        f"LoRA, privacy, algorithm, engine, precision) on {_device()}; replaced:"
    ]
    return lines + [f"  {r}" for r in replaced]
