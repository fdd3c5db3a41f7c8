"""The measurements an estimate reads: per device, the client steps per second of `fedbench bench
--suite table1` and the private / non-private step ratios of `benchmarks/dp_ratio.py`.

Two places hold them, read in this order:

- `fedbench/runner/measurements/` (package data, shipped with fedbench): the devices measured so
  far, each file as its tool wrote it (an NVIDIA H200 from `make gpu-check`, the project's CPUs);
- `benchmarks/results/` in the current folder, where `fedbench bench --suite table1` writes
  `<device>.json` (a user's own measurement of their machine).

A file is recognised by its contents, never by its name: a suite file has `"suite"` and `rows`
of `client_steps_per_s`; a ratio file has `rows` of `non_private_ms`. Adding a device is copying
its file into either folder. When several suite files measure one device, one in the current
folder's `benchmarks/results/` wins (the user's own), else the newest `measured_at` (a newer
H200 measurement copied into `measurements/` replaces the older one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The measurements shipped with fedbench.
SHIPPED_DIR = Path(__file__).with_name("measurements")
#: Where `fedbench bench --suite` writes its figures (relative to the working directory).
RESULTS_DIR = Path("benchmarks/results")


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        return None
    return data


@dataclass(frozen=True)
class Figures:
    """One device's suite results, as `fedbench bench --suite` wrote them."""

    path: Path
    data: dict[str, Any]

    @property
    def rows(self) -> list[dict[str, Any]]:
        return [r for r in self.data.get("rows", []) if isinstance(r, dict)]

    @property
    def device(self) -> str:
        return str(self.data.get("device", "?"))

    @property
    def is_cpu(self) -> bool:
        return self.data.get("device_type") == "cpu" or self.device.startswith("CPU")

    @property
    def representative(self) -> bool:
        """False for a file marked `"representative": false` (measured on a loaded machine,
        say): no estimate reads its rates."""
        return self.data.get("representative", True) is not False

    @property
    def measured_at(self) -> str:
        return str(self.data.get("measured_at") or "")

    def when(self) -> str:
        """'measured 2026-11-26 04:57 UTC at load average 0.4' (or what the file lacks)."""
        when = self.measured_at or "(date not recorded)"
        load = self.data.get("load_average")
        at = f"load average {load:g}" if isinstance(load, int | float) else "load not recorded"
        return f"measured {when}, {at}"

    def source(self) -> str:
        """Where the figures come from: file, device, torch, when, and how they were scaled."""
        parts = [
            f"{self.path} (`fedbench bench --suite {self.data.get('suite', 'table1')}`): "
            f"device {self.device}, torch {self.data.get('torch', '?')}, "
            f"measured: {self.measured_at or 'date not recorded in the file'}"
        ]
        if self.data.get("scaled_down"):
            sets = ", ".join(self.data.get("overrides", []))
            parts.append(f"a scaled-down suite ({sets})")
        if self.data.get("note"):
            parts.append(f"its note: {self.data['note']}")
        return "; ".join(parts)


def load_figures(path: Path) -> Figures | None:
    """The suite results in `path`, or None when there is no such file (or it is no suite)."""
    data = _read(path)
    if data is None or not any("client_steps_per_s" in r for r in data["rows"]):
        return None
    # A suite file names its suite and its device; other benchmarks' files with rows of client
    # steps/s (benchmarks/shared_machine.py, seeds_together.py) measure something else.
    if not isinstance(data.get("suite"), str) or not isinstance(data.get("device"), str):
        return None
    return Figures(path, data)


@dataclass(frozen=True)
class Ratio:
    """A private step's cost over a non-private one, measured on a device for a model."""

    value: float
    method: str  # bk | ghost | vmap
    model: str  # as the ratio file names it: 'resnet18 gn 3x32x32 B50'
    device: str

    def label(self) -> str:
        return f"/ {self.value:.3g} ({self.method}, {self.model} on {self.device})"


@dataclass(frozen=True)
class Ratios:
    """One device's private / non-private ratios, as benchmarks/dp_ratio.py wrote them."""

    path: Path
    data: dict[str, Any]

    @property
    def device(self) -> str:
        return str(self.data.get("device", "?"))

    def ratio(self, model: str, lora: bool, batch: int | None, clipping: str) -> Ratio | None:
        """The ratio for a model (by name; the same batch size preferred) and clipping method
        (`auto`: the method the file says auto ended on, else the execution plan's order,
        fedbench.engine.plan.clipping_candidates); None when not measured."""
        from fedbench.engine.plan import clipping_candidates  # torch: only where a ratio is read

        rows = [
            r
            for r in self.data["rows"]
            if isinstance(r, dict)
            and str(r.get("model", "")).split(" ")[:1] == [model]
            and ("LoRA" in str(r.get("model"))) == lora
        ]
        rows.sort(key=lambda r: r.get("batch") != batch)
        for row in rows:
            auto = row.get("auto")
            for method in clipping_candidates(clipping, auto if isinstance(auto, str) else None):
                value = row.get(f"{method}_ratio")
                if isinstance(value, int | float) and value > 0:
                    return Ratio(float(value), str(method), str(row["model"]), self.device)
        return None


def load_ratios(path: Path) -> Ratios | None:
    data = _read(path)
    if data is None or not any("non_private_ms" in r for r in data["rows"]):
        return None
    return Ratios(path, data)


def _files(results: Path) -> list[tuple[bool, Path]]:
    """(local, path): the shipped files, then the current folder's."""
    shipped = [(False, p) for p in sorted(SHIPPED_DIR.glob("*.json"))]
    return shipped + [(True, p) for p in sorted(results.glob("*.json"))]


def all_figures(results: Path = RESULTS_DIR) -> dict[str, Figures]:
    """Per device, the suite figures an estimate reads: the current folder's, else the newest
    shipped."""
    found: dict[str, tuple[tuple[bool, str], Figures]] = {}
    for local, path in _files(results):
        figures = load_figures(path)
        if figures is None:
            continue
        rank = (local, figures.measured_at)
        held = found.get(figures.device)
        if held is None or rank >= held[0]:
            found[figures.device] = (rank, figures)
    return {device: figures for device, (_, figures) in found.items()}


def all_ratios(results: Path = RESULTS_DIR) -> list[Ratios]:
    return [r for _, path in _files(results) if (r := load_ratios(path)) is not None]
