"""FedAdamW (Liu et al., AAAI 2026), Figure 2: on ViT-Tiny / CIFAR-100, (a) the variance of the
second-moment estimates v across clients for Local AdamW and (b) the client drift of Local AdamW
and Local SGD, over rounds, IID against Dir-0.1.

Both curves are the engine's `eval.diagnostics` measurements (docs/runs.md): `v_spread`, the
variance across the sampled clients of each block mean of v after their K local steps, averaged
over the blocks, and `relative_drift`, mean_i ||Delta_i - mean Delta||^2 / ||mean Delta||^2.
The paper plots the raw drift (`client_drift`); its size scales with the square of the step, so
comparing Local AdamW at lr 3e-4 with Local SGD at 0.1 would compare learning rates. Divided by
the squared mean update, the drift is dimensionless and compares how much the clients disagree,
which is what "drifts more" means.
Every (method, partition, seed) is one run folder under OUT/runs, resumed like a table's.
`DiagnosticsFigure` is shared with DP-FedAdamW's Figure 3 (fedbench/figures/dp_fig3.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from fedbench.engine.run_folder import RunFolder
from fedbench.figures.base import Claim, Figure, FigureContext, FigureData, FigureSettings
from fedbench.figures.registry import FIGURES
from fedbench.figures.stats import exceeds, ratio
from fedbench.metrics_log import read_rows

if TYPE_CHECKING:
    from matplotlib.figure import Figure as MplFigure

    from fedbench.config import RunConfig

DIAGNOSTICS = ("v_spread", "client_drift")

#: ViT-Tiny on CIFAR-100 in the federation of FedAdamW's Table 1 (Appendix C).
PAPER_BASE: dict[str, Any] = {
    "data": {"name": "cifar100", "augment": True},
    "partition": {"clients": 100},
    "model": {"name": "vit_tiny"},
    "fl": {"rounds": 300, "participation": 0.1, "local_steps": 50, "batch_size": 50},
    "algorithm": {"lr_schedule": "cosine", "grad_clip": 10.0},
    "eval": {"every": 10, "train_subset": 2000, "diagnostics": True},
}

#: A tiny timm ViT on 16x16 digits, 10 clients: every run a few seconds on one CPU core.
QUICK_BASE: dict[str, Any] = {
    "data": {"name": "digits", "image_size": 16},
    "partition": {"clients": 10},
    "model": {"name": "vit_micro"},
    "fl": {"rounds": 12, "participation": 0.3, "local_steps": 10, "batch_size": 32},
    "algorithm": {"lr_schedule": "cosine", "grad_clip": 10.0},
    "eval": {"every": 1, "train_subset": 300, "diagnostics": True},
    "runtime": {"checkpoint_every": 0},
}

PARTITIONS: dict[str, dict[str, Any]] = {
    "IID": {"kind": "iid"},
    "Dir-0.1": {"kind": "dirichlet", "alpha": 0.1},
}


class DiagnosticsSettings(FigureSettings):
    """`base` is the run config every curve shares; `methods` and `partitions` map each label
    to the run-config fields it sets; every (method, partition) runs `seeds` seeds."""

    base: dict[str, Any] = Field(default_factory=lambda: json.loads(json.dumps(PAPER_BASE)))
    methods: dict[str, dict[str, Any]] = Field(default_factory=dict)
    partitions: dict[str, dict[str, Any]] = Field(default_factory=lambda: dict(PARTITIONS))
    seeds: int = Field(default=3, ge=1)


class Fig2Settings(DiagnosticsSettings):
    methods: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: {
            # Table 1's learning rates: SGD family 0.1 (wd 1e-3), Adam family 3e-4 (wd 0.01).
            "Local SGD": {"algorithm": {"name": "fedavg", "lr": 0.1, "weight_decay": 1.0e-3}},
            "Local AdamW": {
                "algorithm": {"name": "local_adamw", "lr": 3.0e-4, "weight_decay": 0.01}
            },
        }
    )


class DiagnosticsFigure(Figure):
    """Diagnostics over rounds per (method, partition); claims are ratios of per-run means.

    Each entry of `comparisons` is (diagnostic, statement, (method, partition) of the numerator,
    (method, partition) of the denominator): the claim holds when the 95% interval of the
    geometric-mean ratio over seeds (Welch on the logs) lies above 1."""

    comparisons: ClassVar[list[tuple[str, str, tuple[str, str], tuple[str, str]]]]
    Settings = DiagnosticsSettings

    def configs(self, settings: Any) -> list[tuple[str, str, int, RunConfig]]:
        from fedbench.config import parse_run_config
        from fedbench.errors import FedbenchError
        from fedbench.runner.table_config import _merge_method

        needed = {cell for _, _, *cells in self.comparisons for cell in cells}
        for method, partition in sorted(needed):
            if method not in settings.methods or partition not in settings.partitions:
                raise FedbenchError(
                    f"figure {self.name} compares {method} under {partition}: keep both among "
                    f"its methods ({', '.join(settings.methods)}) and partitions "
                    f"({', '.join(settings.partitions)})"
                )
        found = []
        for method, fields in settings.methods.items():
            for partition, part in settings.partitions.items():
                data = _merge_method(settings.base, fields)
                data = _merge_method(data, {"partition": part})
                data.setdefault("eval", {})["diagnostics"] = True
                for seed in range(settings.seed, settings.seed + settings.seeds):
                    data["seed"] = seed
                    try:
                        cfg = parse_run_config(json.loads(json.dumps(data)))
                    except FedbenchError as exc:
                        raise FedbenchError(
                            f"figure {self.name} {method} {partition}: {exc}"
                        ) from None
                    found.append((method, partition, seed, cfg))
        return found

    def compute(self, settings: Any, context: FigureContext) -> FigureData:
        import pandas as pd

        planned = self.configs(settings)
        folders = context.train([cfg for *_, cfg in planned])
        rows = []
        for (method, partition, seed, _), folder in zip(planned, folders, strict=True):
            for record in read_metrics(folder):
                if record.get("client_drift") is None:
                    continue  # round 0: no local training yet
                rows.append(
                    {
                        "method": method,
                        "partition": partition,
                        "seed": seed,
                        "round": record["round"],
                        "v_spread": record.get("v_spread"),
                        "client_drift": record["client_drift"],
                        "relative_drift": record.get("relative_drift"),
                        "test_acc": record.get("test_acc"),
                        "train_loss": record.get("train_loss"),
                        "run_id": folder.name,
                    }
                )
        return FigureData(pd.DataFrame(rows))

    def draw(self, data: FigureData, settings: Any) -> MplFigure:
        import matplotlib.pyplot as plt

        table = data.table
        panels = [
            ("v_spread", "(a) variance of v across clients"),
            ("relative_drift", "(b) client drift / ||mean update||^2"),
        ]
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        # One colour per method, one line style per partition (the last, most skewed, solid).
        colours = {m: f"C{i}" for i, m in enumerate(settings.methods)}
        for ax, (metric, heading) in zip(axes, panels, strict=True):
            for (method, partition), group in table.groupby(["method", "partition"], sort=False):
                values = group.dropna(subset=[metric])
                if values.empty:
                    continue  # Local SGD keeps no v
                by_round = values.groupby("round")[metric]
                mean = by_round.mean()
                style = "-" if partition == list(settings.partitions)[-1] else "--"
                colour = colours.get(method, "k")
                ax.plot(
                    mean.index, mean.values, style, color=colour, label=f"{method}, {partition}"
                )
                ax.fill_between(
                    mean.index, by_round.min(), by_round.max(), color=colour, alpha=0.15
                )
            ax.set_yscale("log")
            ax.set_xlabel("round")
            ax.set_ylabel(metric)
            ax.set_title(heading)
            ax.legend(fontsize=8)
        fig.suptitle(f"{self.title}\n(mean over {settings.seeds} seeds, band: min-max)", fontsize=9)
        fig.tight_layout()
        return fig

    def claims(self, data: FigureData, settings: Any) -> list[Claim]:
        found = []
        for metric, statement, top, bottom in self.comparisons:
            a, b = run_means(data.table, metric, top), run_means(data.table, metric, bottom)
            comparison = ratio(a, b)
            found.append(
                Claim(
                    statement=statement,
                    statistic=(
                        f"ratio of mean {metric} over rounds, {top[0]} {top[1]} / {bottom[0]} "
                        f"{bottom[1]} (geometric mean over {len(a)} and {len(b)} seeds; Welch "
                        f"on logs, p = {comparison.p:.2g})"
                    ),
                    value=comparison.estimate,
                    interval=comparison.interval,
                    holds=exceeds(comparison, 1.0),
                )
            )
        return found


def read_metrics(folder: Path) -> list[dict[str, Any]]:
    """The rows of a finished run folder's metrics.jsonl (validated: a bad row is one line)."""
    run = RunFolder(folder)
    return read_rows(run.metrics, strict=True, fix=run.retrain_hint)


def run_means(table: Any, metric: str, cell: tuple[str, str]) -> list[float]:
    """Per seed of (method, partition): the mean of `metric` over its evaluated rounds."""
    method, partition = cell
    rows = table[(table["method"] == method) & (table["partition"] == partition)]
    means = rows.dropna(subset=[metric]).groupby("seed")[metric].mean()
    return [float(v) for v in means.values if math.isfinite(v)]


@FIGURES.register("fedadamw-fig2")
class FedAdamWFig2(DiagnosticsFigure):
    paper = "FedAdamW (Liu et al., AAAI 2026), Figure 2"
    title = "Variance of v across clients and client drift over rounds, IID vs Dir-0.1 (ViT)"
    Settings = Fig2Settings
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "quick": {
            "base": QUICK_BASE,
            # 120 local steps on ~100-sample clients: 3e-4 barely moves a random ViT.
            "methods.Local AdamW.algorithm.lr": 3.0e-3,
        }
    }
    comparisons: ClassVar[list[tuple[str, str, tuple[str, str], tuple[str, str]]]] = [
        (
            "v_spread",
            "heterogeneity raises the variance of Local AdamW's second moments across clients",
            ("Local AdamW", "Dir-0.1"),
            ("Local AdamW", "IID"),
        ),
        (
            "relative_drift",
            "Local AdamW drifts more than Local SGD under Dir-0.1 (drift relative to the squared "
            "mean update, so that the two learning rates cancel)",
            ("Local AdamW", "Dir-0.1"),
            ("Local SGD", "Dir-0.1"),
        ),
    ]
