"""The papers' reference numbers, shipped as package data (fedbench/paper_tables/*.csv, long format:
one row per paper, table, method, dataset, model, setting and metric, with mean, std, notes), and the mapping from a table config's rows,
columns and metrics onto the paper's labels."""

from __future__ import annotations

import functools
import math
from importlib import resources
from typing import Any

import pandas as pd

from fedbench.errors import FedbenchError
from fedbench.runner.table_config import PaperRef

#: Grid keys (dotted) -> the paper's setting key, unless a table's `paper.columns` says otherwise.
DEFAULT_COLUMNS = {
    "model.name": "model",
    "partition.alpha": "dir",
    "algorithm.alpha": "align",
    "algorithm.weight_decay": "wd",
    "privacy.noise_multiplier": "sigma",
    "privacy.target_epsilon": "eps",
    "algorithm.beta2": "beta2",
}
#: Our values -> the paper's labels, per grid key.
DEFAULT_VALUES = {
    "model.name": {
        "resnet18": "ResNet-18",
        "vit_tiny": "ViT-Tiny",
        "swin_tiny": "Swin-Tiny",
        "swin_base": "Swin-Base",
        "vit_base": "ViT-Base",
    }
}


def available() -> list[str]:
    folder = resources.files("fedbench") / "paper_tables"
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".csv"))


@functools.cache
def load_paper_table(key: str) -> pd.DataFrame:
    """The rows of fedbench/paper_tables/<key>.csv (mean/std as floats, empty text as "")."""
    path = resources.files("fedbench") / "paper_tables" / f"{key}.csv"
    if not path.is_file():
        raise FedbenchError(
            f"no paper table {key!r} in the package; known: {', '.join(available())}"
        )
    with path.open() as fh:
        df = pd.read_csv(fh, dtype={"model": str, "setting": str, "notes": str})
    for col in ("model", "setting", "notes", "dataset"):
        df[col] = df[col].fillna("")
    return df


def parse_setting(text: str) -> dict[str, str]:
    """'dir=0.1;align=0.5' -> {'dir': '0.1', 'align': '0.5'}."""
    items = [part.split("=", 1) for part in text.split(";") if "=" in part]
    return {k.strip(): v.strip() for k, v in items}


def _same(a: Any, b: Any) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    except (TypeError, ValueError):
        return str(a).strip().lower() == str(b).strip().lower()


#: data.name -> the papers' dataset labels (GLUE tasks also give the `task` setting key).
DATASET_LABELS = {
    "cifar10": "CIFAR-10",
    "cifar100": "CIFAR-100",
    "tinyimagenet": "Tiny-ImageNet",
    "femnist": "FEMNIST",
    "fmnist": "Fashion-MNIST",
    "celeba": "CelebA",
    "shakespeare": "Shakespeare",
}


#: GLUE task names as the papers' tables spell them, where they differ from ours.
GLUE_TASK_LABELS = {"sst2": "sst-2"}


def _dataset_setting(name: str) -> dict[str, str]:
    if name.startswith("glue/"):
        task = name.split("/", 1)[1]
        return {"dataset": "GLUE", "task": GLUE_TASK_LABELS.get(task, task)}
    return {"dataset": DATASET_LABELS.get(name, name)}


def paper_setting(ref: PaperRef, setting: dict[str, Any]) -> dict[str, Any]:
    """Our column (dotted key -> value) in the paper's terms (setting key -> label)."""
    out: dict[str, Any] = {}
    for key, value in setting.items():
        if key == "data.name" and key not in ref.columns:
            out.update(_dataset_setting(str(value)))
            continue
        paper_key = ref.columns.get(key) or DEFAULT_COLUMNS.get(key)
        if paper_key is None:
            continue
        labels = {**DEFAULT_VALUES.get(key, {}), **ref.values.get(key, {})}
        out[paper_key] = labels.get(str(value), value)
    return out


def paper_value(
    ref: PaperRef | None, method: str, setting: dict[str, Any], metric: str
) -> tuple[float, float]:
    """(mean, std) the paper reports for this cell; NaN where it reports none (or ambiguously)."""
    nan = (math.nan, math.nan)
    if ref is None:
        return nan
    df = load_paper_table(ref.table)
    label = ref.rows.get(method, method)
    rows = df[(df["method"] == label) & (df["metric"] == ref.metrics.get(metric, metric))]
    ours = {**ref.where, **paper_setting(ref, setting)}
    matches = []
    for _, row in rows.iterrows():
        theirs = parse_setting(row["setting"])
        if row["model"]:
            theirs["model"] = row["model"]
        if row["dataset"]:
            theirs["dataset"] = row["dataset"]
        if all(_same(theirs[k], v) for k, v in ours.items() if k in theirs):
            matches.append(row)
    if len(matches) != 1:
        return nan
    return float(matches[0]["mean"]), float(matches[0]["std"])
