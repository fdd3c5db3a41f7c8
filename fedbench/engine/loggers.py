"""Experiment tracking through real libraries, opt-in per run (`runtime.loggers`).

metrics.jsonl stays the source of truth: every row the run folder appends is also sent to each
configured logger, with the resolved config as hyperparameters. All of them write inside the run
folder and need no server or account:

- tensorboard: event files in RUN/tensorboard/ (torch.utils.tensorboard; needs `tensorboard`).
  A resumed run purges the events at and after its first recomputed round, so the curves match
  metrics.jsonl exactly.
- wandb: an offline run in RUN/wandb/ (`wandb sync` uploads it later).
- mlflow: a local file store in RUN/mlruns/ (`mlflow ui --backend-store-uri RUN/mlruns`).

wandb and mlflow start a new run on a resumed fedbench run (their steps may then repeat).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import yaml

from fedbench.errors import FedbenchError

#: logger name -> the package it needs (the pyproject extra has the same name).
PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}


class MetricLogger(Protocol):
    def log(self, row: dict[str, Any]) -> None: ...
    def close(self) -> None: ...


def flat_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"algorithm.lr": 0.001, ...}: scalars kept, None as "null", lists/dicts as text."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flat_config(value, f"{dotted}."))
        elif value is None:
            flat[dotted] = "null"
        elif isinstance(value, bool | int | float | str):
            flat[dotted] = value
        else:
            flat[dotted] = str(value)
    return flat


def scalars(row: dict[str, Any]) -> dict[str, float]:
    """The numeric fields of a metrics row except the step (`round`); None values are skipped."""
    return {
        k: float(v)
        for k, v in row.items()
        if k != "round" and isinstance(v, int | float) and not isinstance(v, bool)
    }


class TensorBoardLogger:
    """Scalars per evaluation row, the config as text and as TensorBoard hparams."""

    def __init__(self, folder: Path, config: dict[str, Any], name: str) -> None:
        self.folder, self.config, self.name = folder, config, name
        self.writer: Any = None

    def _open(self, first_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter
        from torch.utils.tensorboard.summary import hparams

        # purge_step: events a previous, interrupted attempt wrote at or after this step are
        # dropped, as metrics.jsonl drops the rows after the checkpoint.
        self.writer = SummaryWriter(str(self.folder), purge_step=first_step or None)
        if first_step == 0:
            text = "```yaml\n" + yaml.safe_dump(self.config, sort_keys=False) + "```"
            self.writer.add_text("config", text, 0)
            metrics = dict.fromkeys(("test_acc", "test_loss", "train_loss"), 0.0)
            for summary in hparams(flat_config(self.config), metrics):
                self.writer.file_writer.add_summary(summary)

    def log(self, row: dict[str, Any]) -> None:
        step = int(row["round"])
        if self.writer is None:
            self._open(step)
        for key, value in scalars(row).items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class WandbLogger:
    """An offline wandb run in the run folder."""

    def __init__(self, folder: Path, config: dict[str, Any], name: str) -> None:
        import wandb

        folder.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project="fedbench",
            name=name,
            dir=str(folder),  # wandb adds its own wandb/ folder under it
            mode="offline",
            config=config,
            reinit="create_new",
            # Quiet: fedbench prints its own progress; no capture of the run's stdout.
            settings=wandb.Settings(silent=True, console="off"),
        )

    def log(self, row: dict[str, Any]) -> None:
        self.run.log(scalars(row), step=int(row["round"]))

    def close(self) -> None:
        self.run.finish()


class MLflowLogger:
    """An MLflow run in a file store inside the run folder."""

    def __init__(self, folder: Path, config: dict[str, Any], name: str) -> None:
        from mlflow.tracking import MlflowClient

        folder.mkdir(parents=True, exist_ok=True)
        # MLflow's plain-file store: no server, no database (a SQLite store costs ~20 s of schema
        # migrations per run). MLflow 3 keeps it "in maintenance mode" behind this opt-in.
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=folder.resolve().as_uri())
        experiment = self.client.get_experiment_by_name("fedbench")
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else self.client.create_experiment("fedbench")
        )
        self.run_id = self.client.create_run(experiment_id, run_name=name).info.run_id
        for key, value in flat_config(config).items():
            # MLflow caps a param value at 6000 characters; configs stay far below.
            self.client.log_param(self.run_id, key, value)

    def log(self, row: dict[str, Any]) -> None:
        for key, value in scalars(row).items():
            self.client.log_metric(self.run_id, key, value, step=int(row["round"]))

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


#: logger name -> (class, sub-folder of the run folder).
LOGGERS: dict[str, tuple[type, str]] = {
    "tensorboard": (TensorBoardLogger, "tensorboard"),
    "wandb": (WandbLogger, ""),  # wandb writes RUN/wandb/ itself
    "mlflow": (MLflowLogger, "mlruns"),
}


def check_loggers(names: Sequence[str]) -> None:
    """Every configured logger's package is importable (a user error otherwise, before any file
    is written)."""
    for name in names:
        package = PACKAGES[name]
        if importlib.util.find_spec(package) is None:
            raise FedbenchError(
                f"runtime.loggers lists {name} but the {package} package is not installed; "
                f"pip install 'fedbench[{name}]' (or remove it from runtime.loggers)"
            )


def open_loggers(names: Sequence[str], run_dir: Path, config: dict[str, Any]) -> list[MetricLogger]:
    """The configured loggers, writing under `run_dir`."""
    check_loggers(names)
    loggers: list[MetricLogger] = []
    for name in names:
        cls, sub = LOGGERS[name]
        loggers.append(cls(run_dir / sub if sub else run_dir, config, run_dir.name))
    return loggers
