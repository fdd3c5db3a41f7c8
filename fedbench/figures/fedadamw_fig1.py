"""FedAdamW (Liu et al., AAAI 2026), Figure 1: Local SGD against Local AdamW on transformers,
each at its own tuned learning rate ("we carefully tune the learning rate").

Per task and method, a learning-rate grid is searched on a validation split held out of the
training data (`data.val_fraction`, as `fedbench tune` does; the test set is not used), with the
figure's first seed; the best final validation accuracy picks the rate (a diverged run scores
worst). The picked rate then runs `seeds` seeds on the test set. Every run is a run folder under
OUT/runs, resumed or read back like a table's. GPT-2 (the paper's third model) is not among
fedbench's models; ViT-Base and RoBERTa-Base are.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, model_validator

from fedbench.engine.run_folder import RunFolder
from fedbench.figures.base import Claim, Figure, FigureContext, FigureData, FigureSettings
from fedbench.figures.registry import FIGURES
from fedbench.figures.stats import exceeds, welch

if TYPE_CHECKING:
    from matplotlib.figure import Figure as MplFigure

    from fedbench.config import RunConfig

#: ViT-Base (ImageNet-21K) fine-tuned on CIFAR-100 and RoBERTa-Base + LoRA on SST-2, in the
#: federations of FedAdamW's Tables 2 and 3 (Appendix C).
PAPER_TASKS: dict[str, dict[str, Any]] = {
    "ViT-Base, CIFAR-100": {
        "data": {"name": "cifar100", "augment": True, "image_size": 224},
        "partition": {"kind": "dirichlet", "alpha": 0.1, "clients": 100},
        "model": {"name": "vit_base", "pretrained": True},
        "fl": {"rounds": 100, "participation": 0.05, "local_steps": 50, "batch_size": 16},
        "algorithm": {"lr_schedule": "cosine", "grad_clip": 10.0},
        "eval": {"every": 10, "train_subset": 2000, "batch_size": 256},
        "runtime": {"precision": "bf16"},
    },
    "RoBERTa-Base, SST-2": {
        "data": {"name": "glue/sst2"},
        "partition": {"kind": "dirichlet_label", "alpha": 0.8, "clients": 20},
        "model": {
            "name": "roberta_base",
            "pretrained": True,
            "lora": {"r": 16, "alpha": 32, "dropout": 0.1, "targets": ["query", "value"]},
        },
        "fl": {"rounds": 100, "participation": 0.2, "local_steps": 50, "batch_size": 32},
        "algorithm": {"lr_schedule": "cosine", "grad_clip": 10.0},
        "eval": {"every": 10, "train_subset": 2000, "batch_size": 256},
        "runtime": {"precision": "bf16"},
    },
}

#: Tiny random transformers that train in seconds on one CPU core: a timm ViT on 16x16 digits
#: and a RoBERTa on generated SST-2 files in GLUE's format (`data.path: miniature`).
QUICK_TASKS: dict[str, dict[str, Any]] = {
    "ViT (vit_micro), digits": {
        "data": {"name": "digits", "image_size": 16},
        "partition": {"kind": "dirichlet", "alpha": 0.6, "clients": 10},
        "model": {"name": "vit_micro"},
        "fl": {"rounds": 12, "participation": 0.3, "local_steps": 10, "batch_size": 32},
        "algorithm": {"lr_schedule": "cosine", "grad_clip": 10.0},
        "eval": {"every": 2, "train_subset": 300},
        "runtime": {"checkpoint_every": 0},
    },
    "RoBERTa (roberta_micro), SST-2 miniature": {
        "data": {"name": "glue/sst2", "path": "miniature"},
        "partition": {"kind": "dirichlet_label", "alpha": 0.8, "clients": 5},
        "model": {"name": "roberta_micro"},
        "fl": {"rounds": 12, "participation": 0.4, "local_steps": 10, "batch_size": 8},
        "algorithm": {"lr_schedule": "cosine", "grad_clip": 10.0},
        "eval": {"every": 2, "train_subset": 0},
        "runtime": {"checkpoint_every": 0},
    },
}

SGD, ADAMW = "Local SGD", "Local AdamW"


class Fig1Settings(FigureSettings):
    """`tasks`: label -> the run config of one transformer task; `methods`: the two methods'
    run-config fields; `lrs`: each method's learning-rate grid; `val_fraction`: the validation
    split the grid is searched on; `seeds`: test runs per (task, method) at the picked rate."""

    tasks: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: json.loads(json.dumps(PAPER_TASKS))
    )
    methods: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: {
            SGD: {"algorithm": {"name": "fedavg", "weight_decay": 1.0e-3}},
            ADAMW: {"algorithm": {"name": "local_adamw", "weight_decay": 0.01}},
        }
    )
    lrs: dict[str, list[float]] = Field(
        default_factory=lambda: {SGD: [0.003, 0.01, 0.03, 0.1], ADAMW: [3e-5, 1e-4, 3e-4, 1e-3]}
    )
    val_fraction: float = Field(default=0.1, gt=0, lt=1)
    seeds: int = Field(default=3, ge=1)

    @model_validator(mode="after")
    def _grids(self) -> Fig1Settings:
        for method in (SGD, ADAMW):
            if method not in self.methods:
                raise ValueError(f"methods needs {method!r} (the figure compares the two)")
            if not self.lrs.get(method):
                raise ValueError(f"lrs needs a non-empty grid for {method!r}")
        if not self.tasks:
            raise ValueError("tasks needs at least one task")
        return self


def _config(base: dict[str, Any], method: dict[str, Any], **fields: Any) -> RunConfig:
    from fedbench.config import parse_run_config, set_path
    from fedbench.runner.table_config import _merge_method

    data = _merge_method(base, method)
    for key, value in fields.items():
        set_path(data, key.split("__"), value)
    return parse_run_config(json.loads(json.dumps(data)))


@FIGURES.register("fedadamw-fig1")
class FedAdamWFig1(Figure):
    paper = "FedAdamW (Liu et al., AAAI 2026), Figure 1"
    title = "Local SGD vs Local AdamW on transformers, each at its tuned learning rate"
    Settings = Fig1Settings
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "quick": {
            "tasks": QUICK_TASKS,
            "lrs": {SGD: [0.03, 0.1, 0.3, 1.0], ADAMW: [1e-3, 3e-3, 1e-2, 3e-2]},
        }
    }

    def compute(self, settings: Any, context: FigureContext) -> FigureData:
        import pandas as pd

        from fedbench.errors import FedbenchError
        from fedbench.figures.fedadamw_fig2 import read_metrics

        rows: list[dict[str, Any]] = []
        picked: dict[str, dict[str, float]] = {}
        search: dict[str, dict[str, dict[str, float | None]]] = {}
        for task, base in settings.tasks.items():
            picked[task], search[task] = {}, {}
            for method in (SGD, ADAMW):
                grid = settings.lrs[method]
                try:
                    configs = [
                        _config(
                            base,
                            settings.methods[method],
                            algorithm__lr=lr,
                            data__val_fraction=settings.val_fraction,
                            seed=settings.seed,
                        )
                        for lr in grid
                    ]
                except FedbenchError as exc:
                    raise FedbenchError(f"figure {self.name} {task} {method}: {exc}") from None
                scores: dict[str, float | None] = {}
                for lr, folder in zip(
                    grid, context.train(configs, allow_diverged=True), strict=True
                ):
                    summary = RunFolder(folder).read_summary() or {}  # validated
                    acc = (summary.get("final") or {}).get("test_acc")
                    ok = summary.get("status") == "completed" and acc is not None
                    scores[str(lr)] = float(acc) if ok and acc is not None else None
                    for record in read_metrics(folder):
                        rows.append(_row(task, method, lr, "validation", settings.seed, record))
                search[task][method] = scores
                best = max(grid, key=lambda lr: -math.inf if (s := scores[str(lr)]) is None else s)
                if scores[str(best)] is None:
                    raise FedbenchError(
                        f"figure {self.name} {task} {method}: every learning rate of "
                        f"{grid} diverged; give a lower grid with --set"
                    )
                picked[task][method] = best
                seeds = range(settings.seed, settings.seed + settings.seeds)
                tested = [
                    _config(base, settings.methods[method], algorithm__lr=best, seed=seed)
                    for seed in seeds
                ]
                for seed, folder in zip(seeds, context.train(tested), strict=True):
                    for record in read_metrics(folder):
                        rows.append(_row(task, method, best, "test", seed, record))
        return FigureData(pd.DataFrame(rows), {"picked_lr": picked, "validation_acc": search})

    def draw(self, data: FigureData, settings: Any) -> MplFigure:
        import matplotlib.pyplot as plt

        table = data.table[data.table["phase"] == "test"]
        tasks = list(settings.tasks)
        fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.8), squeeze=False)
        for ax, task in zip(axes[0], tasks, strict=True):
            for i, method in enumerate((SGD, ADAMW)):
                rows = table[(table["task"] == task) & (table["method"] == method)]
                by_round = rows.dropna(subset=["test_acc"]).groupby("round")["test_acc"]
                mean, std = by_round.mean(), by_round.std().fillna(0.0)
                lr = data.extra["picked_lr"][task][method]
                ax.plot(mean.index, mean.values, color=f"C{i}", label=f"{method} (lr {lr:g})")
                ax.fill_between(mean.index, mean - std, mean + std, color=f"C{i}", alpha=0.2)
            ax.set_title(task, fontsize=10)
            ax.set_xlabel("round")
            ax.set_ylabel("test accuracy (%)")
            ax.legend(fontsize=8)
        fig.suptitle(
            f"{self.title}\n(mean ± std over {settings.seeds} seeds; lr picked on a "
            f"{settings.val_fraction:g} validation split)",
            fontsize=9,
        )
        fig.tight_layout()
        return fig

    def claims(self, data: FigureData, settings: Any) -> list[Claim]:
        table = data.table[data.table["phase"] == "test"]
        found = []
        for task in settings.tasks:
            finals = {}
            for method in (SGD, ADAMW):
                rows = table[(table["task"] == task) & (table["method"] == method)]
                rows = rows.dropna(subset=["test_acc"])
                last = rows.sort_values("round").groupby("seed")["test_acc"].last()
                finals[method] = [float(v) for v in last.values]
            comparison = welch(finals[ADAMW], finals[SGD])
            found.append(
                Claim(
                    statement=f"Local SGD is significantly worse than Local AdamW on {task}",
                    statistic=(
                        f"final test accuracy, Local AdamW - Local SGD (points; Welch over "
                        f"{comparison.n_a} and {comparison.n_b} seeds, p = {comparison.p:.2g})"
                    ),
                    value=comparison.estimate,
                    interval=comparison.interval,
                    holds=exceeds(comparison, 0.0),
                )
            )
        return found


def _row(
    task: str, method: str, lr: float, phase: str, seed: int, record: dict[str, Any]
) -> dict[str, Any]:
    return {
        "task": task,
        "method": method,
        "lr": lr,
        "phase": phase,
        "seed": seed,
        "round": record["round"],
        "test_acc": record.get("test_acc"),
        "train_loss": record.get("train_loss"),
    }
