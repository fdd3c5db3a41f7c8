"""Make one figure: resolve its settings (paper defaults, then a preset, then `--set`), run its
experiment, and write PNG, PDF, the plotted data as CSV, the settings and the checked claims."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from fedbench.errors import FedbenchError
from fedbench.figures.base import Claim, Figure, FigureContext, FigureSettings
from fedbench.files import remove_stale_temporaries, save_figure, write_file

if TYPE_CHECKING:
    from fedbench.runner.smoke.figure_runs import FigureSmoker


@dataclass
class FigureOutput:
    """What `make_figure` wrote and the verdict of every claim."""

    name: str
    folder: Path
    files: list[Path]
    claims: list[Claim]


def figure_settings(
    figure: type[Figure], preset: str | None, overrides: list[str] | None = None
) -> FigureSettings:
    """The figure's settings: paper defaults, then the preset's values, then each `key=value`.

    A preset key or a `--set` key may be dotted (`base.fl.rounds`): it changes one entry of a
    mapping field and keeps the rest of the default (or preset) mapping."""
    from fedbench.config import apply_overrides, format_validation_error, set_path
    from fedbench.suggest import unknown

    data: dict[str, Any] = figure.Settings().model_dump(mode="json")
    if preset is not None:
        if preset not in figure.presets:
            raise FedbenchError(unknown(f"preset of figure {figure.name}", preset, figure.presets))
        for key, value in figure.presets[preset].items():
            set_path(data, key.split("."), copy.deepcopy(value))
    data = apply_overrides(data, overrides or [])
    try:
        return figure.Settings.model_validate(data)
    except ValidationError as exc:
        raise FedbenchError(
            format_validation_error(exc, prefix=f"figure {figure.name}", model=figure.Settings)
        ) from None


def figure_folder(out: Path, name: str, preset: str | None) -> Path:
    """OUT/figures/<name>[-<preset>], kept inside OUT whatever the name holds."""
    from fedbench.engine.run_folder import child_folder

    return child_folder(out / "figures", f"{name}-{preset}" if preset else name)


def make_figure(
    name: str,
    *,
    preset: str | None = None,
    out: Path = Path("results"),
    overrides: list[str] | None = None,
    workers: int | None = None,
    smoke: FigureSmoker | None = None,
) -> FigureOutput:
    """Run figure NAME's experiment (resuming its runs under OUT/runs) and write its files.
    With `smoke` (fedbench.runner.smoke), every run trains in its smoke form."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedbench.figures.registry import FIGURES

    figure_cls = FIGURES.get(name)
    if smoke is not None:
        overrides = [f"{k}={json.dumps(v)}" for k, v in figure_cls.smoke_settings.items()]
    settings = figure_settings(figure_cls, preset, overrides)
    folder = figure_folder(out, name, preset)
    folder.mkdir(parents=True, exist_ok=True)
    figure = figure_cls()
    context = FigureContext(out=out, folder=folder, workers=workers, smoke=smoke)
    data = figure.compute(settings, context)
    claims = figure.claims(data, settings)
    drawn = figure.draw(data, settings)
    files = [folder / f"{name}.png", folder / f"{name}.pdf", folder / f"{name}.csv"]
    # Each file atomically (fedbench.files): a full disk or a kill keeps the previous figure.
    remove_stale_temporaries(folder)
    save_figure(drawn, files[0], dpi=150, bbox_inches="tight")
    save_figure(drawn, files[1], bbox_inches="tight")
    plt.close(drawn)
    write_file(files[2], data.table.to_csv(index=False))
    record = {
        "figure": name,
        "paper": figure_cls.paper,
        "title": figure_cls.title,
        "preset": preset,
        "overrides": list(overrides or []),
        "settings": settings.model_dump(mode="json"),
        "claims": [claim.to_dict() for claim in claims],
        "extra": data.extra,
    }
    files.append(folder / "claims.json")
    write_file(files[-1], json.dumps(record, indent=2, default=str) + "\n")
    return FigureOutput(name, folder, files, claims)
