"""GLUE tasks (Wang et al. 2019) as token-id tensors: `glue/<task>` for cola, sst2, mrpc, qqp, qnli,
rte, mnli (FedAdamW Table 3).

Sources, in order: data.path (a task folder), else data.root/glue/<task>/ (lower-case, or the
GLUE download's CoLA, SST-2, ... names), holding either the GLUE TSVs (train.tsv, dev.tsv;
MNLI dev_matched.tsv) or a `datasets` DatasetDict saved with save_to_disk; else the Hugging Face
cache of nyu-mll/glue through `datasets` (HF_HUB_OFFLINE honoured). The test set is the labelled
validation split (MNLI: validation_matched). Text is tokenised once with the RoBERTa tokenizer
(data.root/glue/tokenizer/ when present, else FacebookAI/roberta-base from the HF cache), padded
and truncated to 128 tokens, and cached as .npz in the task folder. x is (n, 128) int64 with the
pad id 1; the model builds the attention mask from it. CoLA reports Matthews correlation x 100.

`data.path: miniature` writes and uses tiny generated TSVs and a tiny tokenizer (tests, `quick`).
"""

from __future__ import annotations

import csv
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from fedbench.config import DataConfig
from fedbench.data.base import DATASETS, Dataset, data_root
from fedbench.errors import FedbenchError

if TYPE_CHECKING:
    import datasets
    from transformers import PreTrainedTokenizerBase

MAX_LEN = 128
HF_TOKENIZER = "FacebookAI/roberta-base"
NLI = {"entailment": 0, "not_entailment": 1}


@dataclass(frozen=True)
class Task:
    folder: str  # the GLUE download's folder name
    hf_text: tuple[str, ...]  # column names in nyu-mll/glue
    tsv_text: tuple[str | int, ...]  # header names (or column numbers without a header)
    tsv_label: str | int
    classes: int
    labels: dict[str, int] | None = None  # string labels of the TSV
    header: bool = True
    dev: str = "dev.tsv"
    hf_eval: str = "validation"
    metric: str = "accuracy"


TASKS = {
    "cola": Task("CoLA", ("sentence",), (3,), 1, 2, header=False, metric="mcc"),
    "sst2": Task("SST-2", ("sentence",), ("sentence",), "label", 2),
    "mrpc": Task("MRPC", ("sentence1", "sentence2"), ("#1 String", "#2 String"), "Quality", 2),
    "qqp": Task("QQP", ("question1", "question2"), ("question1", "question2"), "is_duplicate", 2),
    "qnli": Task("QNLI", ("question", "sentence"), ("question", "sentence"), "label", 2, NLI),
    "rte": Task("RTE", ("sentence1", "sentence2"), ("sentence1", "sentence2"), "label", 2, NLI),
    "mnli": Task(
        "MNLI",
        ("premise", "hypothesis"),
        ("sentence1", "sentence2"),
        "gold_label",
        3,
        {"entailment": 0, "neutral": 1, "contradiction": 2},
        dev="dev_matched.tsv",
        hf_eval="validation_matched",
    ),
}

Columns = tuple[list[list[str]], np.ndarray]  # texts per text column, labels


def read_tsv(path: Path, task: Task) -> Columns:
    """A GLUE TSV (no quoting); rows with a missing field or an unknown label are skipped."""
    csv.field_size_limit(sys.maxsize)
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))
    if task.header:
        head, rows = rows[0], rows[1:]
        cols = [head.index(str(c)) for c in task.tsv_text]
        label_col = head.index(str(task.tsv_label))
    else:
        cols, label_col = [int(c) for c in task.tsv_text], int(task.tsv_label)
    texts: list[list[str]] = [[] for _ in cols]
    labels = []
    for row in rows:
        if len(row) <= max(*cols, label_col):
            continue
        raw = row[label_col].strip()
        label = task.labels.get(raw) if task.labels else (int(raw) if raw.isdigit() else None)
        if label is None:
            continue
        for out, c in zip(texts, cols, strict=True):
            out.append(row[c])
        labels.append(label)
    return texts, np.asarray(labels, dtype=np.int64)


def _from_hf(split: datasets.Dataset, task: Task) -> Columns:
    return [list(split[c]) for c in task.hf_text], np.asarray(split["label"], dtype=np.int64)


def task_folder(cfg: DataConfig, name: str) -> Path:
    if cfg.path == "miniature":
        from fedbench.data.miniature import write_glue

        return write_glue(data_root(cfg) / "miniature" / "glue", name)
    if cfg.path:
        return Path(cfg.path).expanduser()
    base = data_root(cfg) / "glue"
    for candidate in (base / name, base / TASKS[name].folder):
        if candidate.is_dir():
            return candidate
    return base / name


def read_splits(folder: Path, name: str) -> tuple[Columns, Columns]:
    task = TASKS[name]
    if (folder / "train.tsv").is_file() and (folder / task.dev).is_file():
        return read_tsv(folder / "train.tsv", task), read_tsv(folder / task.dev, task)
    try:
        import datasets
    except ImportError:  # pragma: no cover - a declared dependency
        raise FedbenchError(
            "glue datasets need the `datasets` package: pip install datasets"
        ) from None
    try:
        if (folder / "dataset_dict.json").is_file():
            splits = datasets.load_from_disk(str(folder))
        else:
            splits = datasets.load_dataset("nyu-mll/glue", name)
        return _from_hf(splits["train"], task), _from_hf(splits[task.hf_eval], task)
    except Exception as exc:  # offline and not cached, or an incomplete copy
        raise FedbenchError(
            f"dataset glue/{name} not found: no {folder}/train.tsv and {task.dev} (GLUE TSVs), no "
            f"saved dataset in {folder}, and nyu-mll/glue/{name} is not in the Hugging Face cache "
            f"({type(exc).__name__}); put the GLUE {task.folder} TSVs in {folder} or run "
            f"datasets.load_dataset('nyu-mll/glue', '{name}').save_to_disk('{folder}')"
        ) from None


def load_tokenizer(cfg: DataConfig, folder: Path) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer

    candidates = [folder.parent / "tokenizer", data_root(cfg) / "glue" / "tokenizer"]
    local = next((c for c in candidates if c.is_dir()), None)
    try:
        return AutoTokenizer.from_pretrained(str(local) if local else HF_TOKENIZER)
    except OSError as exc:
        raise FedbenchError(
            f"the RoBERTa tokenizer was not found in {candidates[-1]} or the Hugging Face cache "
            f"({type(exc).__name__}); run AutoTokenizer.from_pretrained('{HF_TOKENIZER}')"
            f".save_pretrained('{candidates[-1]}') on a machine with network access"
        ) from None


def tokenize(tokenizer: PreTrainedTokenizerBase, columns: Columns) -> np.ndarray:
    texts, _ = columns
    enc = tokenizer(*texts, max_length=MAX_LEN, truncation=True, padding="max_length")
    return np.asarray(enc["input_ids"], dtype=np.int64)


def _tokenizer_key(tokenizer: PreTrainedTokenizerBase) -> str:
    text = (
        tokenizer.backend_tokenizer.to_str()
        if hasattr(tokenizer, "backend_tokenizer")
        else repr(tokenizer)
    )
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def load_glue(cfg: DataConfig, name: str) -> Dataset:
    folder = task_folder(cfg, name)
    tokenizer = load_tokenizer(cfg, folder)
    cache = folder / f"fedbench-tokens-{_tokenizer_key(tokenizer)}-{MAX_LEN}.npz"
    if cache.is_file():
        with np.load(cache) as z:
            arrays = {k: z[k] for k in z.files}
    else:
        train, test = read_splits(folder, name)
        arrays = {
            "x_train": tokenize(tokenizer, train),
            "y_train": train[1],
            "x_test": tokenize(tokenizer, test),
            "y_test": test[1],
        }
        try:
            folder.mkdir(parents=True, exist_ok=True)
            np.savez(cache, **arrays)
        except OSError:  # read-only copy: tokenise again next time
            pass
    task = TASKS[name]
    return Dataset(
        name=f"glue/{name}",
        x_train=torch.from_numpy(arrays["x_train"]),
        y_train=torch.from_numpy(arrays["y_train"]),
        x_test=torch.from_numpy(arrays["x_test"]),
        y_test=torch.from_numpy(arrays["y_test"]),
        num_classes=task.classes,
        metric=task.metric,
    )


def _register(name: str) -> None:
    def loader(cfg: DataConfig) -> Dataset:
        return load_glue(cfg, name)

    loader.__doc__ = (
        f"GLUE {TASKS[name].folder}: token ids (n, {MAX_LEN}), {TASKS[name].classes} classes"
    )
    DATASETS.register(f"glue/{name}")(loader)


for _name in TASKS:
    _register(_name)
