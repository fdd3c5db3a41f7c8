"""Before a sweep trains anything (and in `--dry-run`): is every dataset and every set of
pretrained weights its runs need on this machine?

A sweep without its data used to start, record every run as refused and exit 0 with the error
text in each cell. The check loads each distinct dataset once and builds each distinct pretrained
model once, in this process, through the same loaders the runs use, so it finds exactly what a
run would miss, with the loader's own message (the dataset, the paths searched, how to provide
it). Runs already finished in OUT need nothing and are not checked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fedbench.config import ModelConfig, RunConfig
from fedbench.data import Dataset, load_dataset
from fedbench.engine.run_folder import RunFolder
from fedbench.errors import FedbenchError
from fedbench.runner.table_config import Plan


@dataclass(frozen=True)
class Missing:
    """One thing a sweep needs and cannot find: what, the loader's message, and its runs."""

    what: str  # "dataset cifar100" | "weights swin_base"
    message: str
    runs: int

    def line(self) -> str:
        return f"{self.message} [needed by {self.runs} run{'s' * (self.runs != 1)}]"


@dataclass(frozen=True)
class Checked:
    """The outcome of a check: what was found and what is missing."""

    datasets: list[str]
    weights: list[str]
    missing: list[Missing]
    finished: int  # runs already finished in OUT (nothing to check for them)

    def found_line(self) -> str:
        """'checked: data digits found; no pretrained weights needed' (the --dry-run line)."""
        data = ", ".join(self.datasets) or "none needed"
        weights = ", ".join(self.weights) or "none needed"
        done = f"; {self.finished} runs already finished" if self.finished else ""
        return f"checked before training: datasets {data}; pretrained weights {weights}{done}"


class MissingResources(FedbenchError):
    """A sweep cannot start: one line per missing dataset or set of weights."""

    def __init__(self, table: str, missing: list[Missing]) -> None:
        self.missing = missing
        head = f"{table}: {len(missing)} missing before training, nothing was run:"
        super().__init__("\n".join([head, *(f"  {m.line()}" for m in missing)]))


def _needs_weights(model: ModelConfig) -> bool:
    return model.pretrained or model.weights is not None


def _probe_shape(cfg: RunConfig) -> tuple[int, ...] | None:
    """An input shape to try the weights of a model whose data is missing: token ids for GLUE,
    square RGB images of data.image_size otherwise; None when it cannot be guessed."""
    if cfg.data.name.startswith("glue/"):
        return (128,)
    if cfg.data.image_size is not None:
        return (3, cfg.data.image_size, cfg.data.image_size)
    return None


def _weights_error(model: ModelConfig, shape: tuple[int, ...], classes: int) -> str | None:
    from fedbench.models import build_model

    try:
        build_model(model, shape, classes)
    except FedbenchError as exc:
        return str(exc)
    return None


def _unfinished(plan: Plan, out: Path | None) -> tuple[list[RunConfig], int]:
    """The distinct configs of the plan's runs not finished in OUT, and how many are finished."""
    pending: dict[str, RunConfig] = {}
    finished = 0
    for run in plan.runs:
        if run.run_id in pending:
            continue
        if out is not None and RunFolder.for_config(out, run.cfg).is_finished():
            finished += 1
            continue
        pending[run.run_id] = run.cfg
    return list(pending.values()), finished


def _group(cfgs: list[RunConfig], key: Callable[[RunConfig], str]) -> list[list[RunConfig]]:
    groups: dict[str, list[RunConfig]] = {}
    for cfg in cfgs:
        groups.setdefault(key(cfg), []).append(cfg)
    return list(groups.values())


def _check_weights(cfg: RunConfig, data: Dataset | None) -> str | None:
    """The error building cfg's pretrained model raises (None: the weights are there). Without
    the data, a guessed input shape still finds missing weights, so one pass lists both."""
    if data is not None:
        return _weights_error(cfg.model, _shape_of(data, cfg), data.num_classes)
    shape = _probe_shape(cfg)
    error = _weights_error(cfg.model, shape, 2) if shape else None
    return error if error is not None and "weights" in error else None  # else: a wrong guess


def check_plan(plan: Plan, out: Path | None = None, *, download: bool = True) -> Checked:
    """Load every distinct dataset and build every distinct pretrained model of the plan's
    unfinished runs (those not finished in OUT when `out` is given); report what is missing.
    With `download=False` (a dry run) nothing is downloaded: a dataset the runs would download
    is reported missing, with a note saying that `fedbench run` downloads it."""
    pending, finished = _unfinished(plan, out)
    missing: list[Missing] = []
    found_data: list[str] = []
    found_weights: list[str] = []
    for cfgs in _group(pending, lambda c: c.data.model_dump_json()):
        data_cfg = cfgs[0].data
        try:
            data: Dataset | None = load_dataset(
                data_cfg if download else data_cfg.model_copy(update={"download": False})
            )
            found_data.append(data_cfg.name)
        except FedbenchError as exc:
            data = None
            note = "" if download or not data_cfg.download else _DOWNLOAD_NOTE
            missing.append(Missing(f"dataset {data_cfg.name}", f"{exc}{note}", len(cfgs)))
        wanting = [c for c in cfgs if _needs_weights(c.model)]
        for model_cfgs in _group(wanting, lambda c: c.model.model_dump_json()):
            name = model_cfgs[0].model.name
            error = _check_weights(model_cfgs[0], data)
            if error is None:
                found_weights.append(name)
            else:
                missing.append(Missing(f"weights {name}", error, len(model_cfgs)))
        del data  # one dataset in memory at a time
    return Checked(sorted(set(found_data)), sorted(set(found_weights)), _dedupe(missing), finished)


_DOWNLOAD_NOTE = " (a dry run downloads nothing; `fedbench run` tries to download it first)"


def missing_warning(table: str, missing: list[Missing]) -> str:
    """The dry run's warning: what a real sweep would stop on (it exits 2 until they are there)."""
    head = (
        f"warning: {table}: {len(missing)} missing on this machine; `fedbench run` stops before "
        "training (exit 2) until they are there:"
    )
    return "\n".join([head, *(f"  {m.line()}" for m in missing)])


def _shape_of(data: Dataset, cfg: RunConfig) -> tuple[int, ...]:
    """The model's input shape as the engine builds it (data.image_size resizes images)."""
    shape = data.input_shape
    if cfg.data.image_size is not None and len(shape) == 3:
        shape = (shape[0], cfg.data.image_size, cfg.data.image_size)
    return shape


def _dedupe(missing: list[Missing]) -> list[Missing]:
    """One line per message: the same dataset under two data configs (augment on and off) is
    one missing thing, needed by the runs of both."""
    merged: dict[str, Missing] = {}
    for item in missing:
        if item.message in merged:
            prev = merged[item.message]
            merged[item.message] = Missing(prev.what, prev.message, prev.runs + item.runs)
        else:
            merged[item.message] = item
    return list(merged.values())


def check_runs_here(plan: Plan) -> None:
    """Raise FedbenchError (exit code 2, one line) when a run of `plan` asks for something this
    machine cannot do at all (a CUDA device that is not there, `runtime.cuda_graphs: on` without
    one): the same check `fedbench train` makes, made for every command before anything is
    written, so that no sweep, tune or smoke check records such runs as failed or unsupported
    cells. Not for the Ray launcher, whose workers are other machines."""
    from fedbench.engine.plan import check_cuda_graphs
    from fedbench.engine.setup import resolve_device

    seen: set[str] = set()
    for run in plan.runs:
        cfg = run.cfg
        key = cfg.runtime.model_dump_json() + str(cfg.privacy is not None)
        if key not in seen:
            seen.add(key)
            check_cuda_graphs(cfg, resolve_device(cfg.runtime.device))


def require_resources(plan: Plan, out: Path | None = None) -> Checked:
    """check_plan, raising MissingResources (exit code 2, one line per missing thing)."""
    checked = check_plan(plan, out)
    if checked.missing:
        raise MissingResources(plan.name, checked.missing)
    return checked
