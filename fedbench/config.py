"""Run configuration: pydantic models, YAML loading and `--set a.b=value` overrides.

The field names are fedbench's public interface (README, "Config reference"; every algorithm
field: docs/algorithms.md). Every model forbids unknown keys so that a typo is an error, never a
silently ignored setting.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    Field,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)

from fedbench import plugins
from fedbench.algorithms.params import (
    AlgorithmConfig,
    algorithm_class,
    algorithm_name,
    algorithm_params,
    private_identity,
)
from fedbench.algorithms.registry import ALGORITHMS
from fedbench.errors import FedbenchError
from fedbench.partitions import KIND_SETTINGS, PARTITIONS, settings_read
from fedbench.strict import Seed, Strict
from fedbench.suggest import unknown_algorithm_field, unknown_field
from fedbench.yaml_safe import MAX_YAML_BYTES, load_yaml

if TYPE_CHECKING:
    from fedbench.plugins import Plugin


class UsersConfig(Strict):
    """Which natural users a dataset with user ids keeps (LEAF's sampling options)."""

    #: LEAF's user fraction: a seeded subsample of this share of the users.
    fraction: float = Field(default=1.0, gt=0, le=1)
    #: Exactly this many users (seeded choice after the fraction); null keeps them all.
    count: int | None = Field(default=None, ge=1)
    #: LEAF's minimum number of samples per user (training samples), applied first.
    min_samples: int = Field(default=0, ge=0)
    seed: Seed = 0


class DataConfig(Strict):
    name: str = "digits"
    root: str | None = None
    path: str | None = None
    download: bool = True
    augment: bool = True
    #: Bounded: a 100000-pixel side would allocate terabytes before anything trains.
    image_size: int | None = Field(default=None, gt=0, le=4096)
    users: UsersConfig = Field(default_factory=UsersConfig)
    #: A validation split held out of the training data (seeded by partition.seed, the same for
    #: every run seed and trial): evaluation then uses it instead of the test set. `fedbench tune`
    #: sets it so that no learning rate is chosen on the test set.
    val_fraction: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="fraction of the training data held out as the evaluation set (0: test set)",
    )


class PartitionConfig(Strict):
    kind: str = Field(
        default="dirichlet",
        description="a registered partition kind (fedbench list partitions)",
    )
    alpha: float = Field(default=0.6, gt=0)
    clients: int = Field(default=20, ge=1)
    samples_per_client: int | None = Field(default=None, ge=1)
    seed: Seed = 0
    client_test_fraction: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="share of each client's samples held out of training as its local test "
        "set (eval.per_client); 0: none",
    )
    shards_per_client: int = Field(
        default=2,
        ge=1,
        description="kind shards: label-sorted shards per client (McMahan et al. 2017: 2)",
    )

    @field_validator("kind")
    @classmethod
    def _registered_kind(cls, value: str) -> str:
        PARTITIONS.get(value)  # an unknown kind: a one-line error with the closest names
        return value


class ModelConfig(Strict):
    name: str = "cnn"
    norm: Literal["bn", "gn"] = "bn"
    #: GroupNorm groups of `norm: gn` (capped at the channel count); FedAdamom's code uses 2.
    norm_groups: int = Field(default=32, ge=1)
    pretrained: bool = False
    weights: str | None = None
    init: Literal["default", "zeros"] = "default"
    lora: dict[str, Any] | None = None


class FLConfig(Strict):
    rounds: int = Field(default=30, ge=1)
    participation: float = Field(default=0.25, gt=0, le=1)
    local_steps: int = Field(default=20, ge=1)
    batch_size: int = Field(default=32, ge=0, description="0: the client's whole dataset")
    local_steps_min: int | None = Field(
        default=None,
        ge=1,
        description="system heterogeneity: each client's local steps in a round are drawn "
        "uniformly from local_steps_min..local_steps (seeded by seed, round, client); "
        "null: every client runs local_steps",
    )
    dropout: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="probability that a sampled client drops out of a round (seeded by seed, "
        "round, client): its update is lost and the round averages the clients that finished",
    )
    label_smoothing: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="label smoothing s of the local objective: cross-entropy against "
        "(1 - s) * onehot + s / classes (evaluation reports the plain cross-entropy)",
    )

    @model_validator(mode="after")
    def _local_steps_range(self) -> FLConfig:
        if self.local_steps_min is not None and self.local_steps_min > self.local_steps:
            raise ValueError(
                f"local_steps_min {self.local_steps_min} exceeds local_steps {self.local_steps}"
            )
        return self


class PrivacyConfig(Strict):
    noise_multiplier: float = Field(default=1.0, ge=0)
    clip: float = Field(default=0.1, gt=0)
    delta: float = Field(default=1.0e-5, gt=0, lt=1)
    target_epsilon: float | None = Field(default=None, gt=0)
    accountant: Literal["rdp", "prv"] = "rdp"
    sampling: Literal["fixed", "poisson"] = Field(
        default="fixed",
        description="fixed: batches of B (level sample) or S clients a round (level client), "
        "accounted as Poisson: approximate, epsilon may be understated; poisson: each sample / "
        "client joins independently at q, the mechanism the accountant analyses: exact",
    )
    level: Literal["sample", "client"] = Field(
        default="sample",
        description="sample: per-sample clipping and noise on every local gradient (DP-SGD); "
        "client: each client's update clipped to `clip` and Gaussian noise added to their sum "
        "at the server (DP-FedAvg, McMahan et al. 2018)",
    )
    adaptive_clip: bool = Field(
        default=False,
        description="client level: adapt `clip` each round toward the target_quantile of the "
        "update norms (Andrew et al. 2021); `clip` is the initial value",
    )
    target_quantile: float = Field(
        default=0.5, gt=0, lt=1, description="adaptive_clip: the quantile gamma to track"
    )
    clip_lr: float = Field(
        default=0.2, gt=0, description="adaptive_clip: the geometric step eta_C of the clip"
    )
    count_noise: float | None = Field(
        default=None,
        gt=0,
        description="adaptive_clip: std sigma_b of the noise on the count of unclipped updates "
        "(null: expected clients per round / 20, Andrew et al.'s choice)",
    )
    clipping: Literal["auto", "bk", "ghost", "vmap"] = Field(
        default="auto",
        description="level sample: how the clipped per-sample sum is computed, all exact (speed "
        "only, not part of the run id): bk (book-keeping, one backward pass), ghost (Opacus), "
        "vmap (torch.func); auto: bk, else ghost, else vmap, as the model allows",
    )

    @model_validator(mode="after")
    def _client_level_fields(self) -> PrivacyConfig:
        if self.level == "sample" and self.adaptive_clip:
            raise ValueError("adaptive_clip applies to level client only")
        if self.level == "client" and self.clipping != "auto":
            raise ValueError("clipping applies to level sample only")
        return self


def _unhashed_privacy(privacy: PrivacyConfig) -> tuple[str, ...]:
    """Privacy fields left out of the run id: `clipping` (how the clipped sums are computed:
    speed only, every method is exact; added after run ids were first issued), and at sample
    level the client-level fields."""
    if privacy.level == "sample":
        return ("clipping", "level", "adaptive_clip", "target_quantile", "clip_lr", "count_noise")
    return ("clipping",)


class EvalConfig(Strict):
    every: int = Field(default=5, ge=1)
    train_subset: int = Field(default=2000, ge=0, description="0: the whole training set")
    report: Literal["final", "best", "last_k_mean"] = "final"
    last_k: int = Field(default=3, ge=1)
    batch_size: int = Field(default=1024, ge=1)
    diagnostics: bool = False
    per_client: bool = Field(
        default=False,
        description="also evaluate on each sampled client's own test data: client_acc/loss "
        "mean, worst10 and std in metrics.jsonl",
    )
    #: test_acc (%) whose first evaluated round is `rounds_to_target` in summary.json (FedAdamom).
    target: float | None = None
    personal: bool = Field(
        default=False,
        description="the personalised evaluation protocol at the last round (docs/personalised.md):"
        " each client's own model on its own test data, before and after the method's "
        "fine-tuning; always on for a personalising algorithm",
    )
    unseen_clients: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description="share of the clients that never train, held out to measure generalisation"
        " to new clients (eval.personal); 0: none",
    )


class RuntimeConfig(Strict):
    device: str = "auto"
    #: fp32; tf32 = fp32 storage with TF32 matmuls/convolutions on CUDA (fp32 on the CPU);
    #: bf16 = bfloat16 autocast of forward and backward.
    precision: Literal["fp32", "tf32", "bf16"] = "fp32"
    compile: bool = False
    #: auto = the engine measured fastest for the run (fedbench.engine.plan.executor_choice):
    #: vectorized for a compiled small model on the CPU, sequential otherwise.
    engine: Literal["auto", "sequential", "vectorized"] = "auto"
    checkpoint_every: int = Field(default=10, ge=0, description="0 disables checkpoints")
    workers: int | None = Field(default=None, ge=1)
    #: The local launcher runs this many runs at once on each GPU (small models leave most of a
    #: GPU idle); without a GPU it has no effect (one run per CPU core).
    runs_per_gpu: int = Field(default=1, ge=1)
    #: The local launcher trains up to this many seeds of a table cell (runs that differ only in
    #: `seed`) together in one process, stacked in one vectorised computation, each written to
    #: its own run folder as its separate run would be (needs `engine: vectorized`). auto: all
    #: of a cell's seeds on a GPU, 1 on the CPU. Speed only: no run id or result changes.
    seeds_together: Annotated[int, Field(ge=1)] | Literal["auto"] = 1
    #: Resources of one run as a Ray task (`--launcher ray`). gpus_per_run null: 1/runs_per_gpu
    #: when the cluster has GPUs, else 0; fractions pack several runs on one GPU.
    gpus_per_run: float | None = Field(default=None, ge=0)
    cpus_per_run: float = Field(default=1.0, gt=0)
    #: Where the per-client state store (e.g. SCAFFOLD's c_i for all N clients) lives between
    #: rounds: auto = cpu when the model is on a GPU (N model-sized states rarely fit beside it).
    client_state_device: Literal["auto", "cpu", "device"] = "auto"
    #: MiB of per-client states kept in memory; beyond it the least recently written go to
    #: the run folder's client_states/ (fedbench.personal.store); null: no bound.
    client_state_memory: float | None = Field(default=None, gt=0)
    #: Clients trained together by the vectorised engine (peak memory grows linearly with it):
    #: auto = as many as fit in half the free device memory, from an estimate per client.
    #: (ge=1 on the int alone: on the union it rejects "auto" when a config is read back.)
    client_chunk: Annotated[int, Field(ge=1)] | Literal["auto"] = "auto"
    #: Replay captured CUDA graphs: the sequential engine's forward + backward, the vectorised
    #: engine's whole stacked step (fedbench.engine.graphed). auto = on for CUDA devices where
    #: the run allows it (the execution plan says), off on the CPU.
    cuda_graphs: Literal["auto", "on", "off"] = "auto"
    #: torch CPU threads of a run: auto = the CPU affinity's cores split over a sweep's workers
    #: where OpenMP waits passively (fedbench's default), else the free ones (less the 1-minute
    #: load average; fedbench.threads); a number overrides.
    threads: Annotated[int, Field(ge=1)] | Literal["auto"] = "auto"
    #: Processes that train a round's sampled clients (the run's own and forked ones, each with
    #: `threads` threads); the uploads are aggregated in client order, so the result is bitwise
    #: the one-process run's at the same threads. auto = the execution plan's choice
    #: (fedbench.engine.layout): for a small model on the CPU, the run's cores at one thread each.
    client_processes: Annotated[int, Field(ge=1)] | Literal["auto"] = "auto"
    loggers: list[Literal["tensorboard", "wandb", "mlflow"]] = Field(
        default_factory=list,
        description="experiment trackers that also receive every metrics row, writing inside "
        "the run folder (metrics.jsonl stays the source of truth)",
    )

    @model_validator(mode="after")
    def _seeds_together_needs_vectorized(self) -> RuntimeConfig:
        if self.seeds_together != 1 and self.engine != "vectorized":
            raise ValueError(
                "runtime.seeds_together stacks seeds in the vectorised engine: "
                "set runtime.engine: vectorized (or seeds_together: 1)"
            )
        return self

    @field_validator("cuda_graphs", mode="before")
    @classmethod
    def _yaml_on_off(cls, value: Any) -> Any:
        # YAML 1.1 reads an unquoted on/off as true/false.
        return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value


#: Fields added after run ids were first issued, with their no-op values: hashed only where
#: they act, so that the runs that do not use them keep their ids (and resume).
_NOOP_ADDITIONS: dict[str, dict[str, Any]] = {
    "algorithm": {"lr_schedule_scope": "round", "convention": "reddi"},  # convention: fedopt.py
    "fl": {"local_steps_min": None, "dropout": 0.0, "label_smoothing": 0.0},
    "eval": {"personal": False, "unseen_clients": 0.0},
}


def _drop_noop_additions(data: dict[str, Any]) -> None:
    for section, fields in _NOOP_ADDITIONS.items():
        for key, noop in fields.items():
            if key in data[section] and data[section][key] == noop:
                del data[section][key]


def _drop_speed_settings(runtime: dict[str, Any]) -> None:
    """Remove from a runtime section the settings that change speed or memory, not results."""
    for key in (
        "workers",
        "checkpoint_every",
        "client_state_device",
        "client_state_memory",
        "client_chunk",
        "cuda_graphs",
        "loggers",
        "runs_per_gpu",
        "seeds_together",
        "gpus_per_run",
        "cpus_per_run",
        "threads",
        "client_processes",
    ):
        runtime.pop(key, None)
    # The engines are one computation (they agree to float rounding): `auto`, the default since
    # it was added, hashes as the sequential engine, the default before it, so that the runs
    # issued before keep their ids (and resume).
    if runtime.get("engine") == "auto":
        runtime["engine"] = "sequential"


class RunConfig(Strict):
    """One training run (README, "Config reference")."""

    seed: Seed = 0
    data: DataConfig = Field(default_factory=DataConfig)
    partition: PartitionConfig = Field(default_factory=PartitionConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    fl: FLConfig = Field(default_factory=FLConfig)
    algorithm: SerializeAsAny[AlgorithmConfig] = Field(default=None, validate_default=True)
    privacy: PrivacyConfig | None = None
    eval: EvalConfig = Field(default_factory=EvalConfig)
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)

    @model_validator(mode="before")
    @classmethod
    def _privacy_defaults_for_dp_algorithms(cls, data: Any) -> Any:
        # A dp_ algorithm without a `privacy:` section runs with that section's defaults.
        if (
            isinstance(data, dict)
            and data.get("privacy") is None
            and algorithm_class(data.get("algorithm")).requires_privacy
        ):
            return {**data, "privacy": {}}
        return data

    @field_validator("algorithm", mode="before")
    @classmethod
    def _algorithm_by_name(cls, value: Any) -> AlgorithmConfig:
        # Validated by the hyperparameter model its `name` selects; pydantic prefixes the
        # errors of that model with `algorithm.`.
        return algorithm_params(value)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def config_hash(self, *, legacy: bool = False) -> str:
        """SHA-256 of everything that can change the results (what run_id abbreviates); a
        checkpoint records it, so that one copied from another run is never resumed.
        `legacy`: the hash as issued before run ids left out the partition settings a kind does
        not read (a checkpoint written then still resumes)."""
        data = self._with_plugin_code(self._results_data(legacy=legacy))
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

    def used_plugins(self) -> list[Plugin]:
        """The plugins that registered a name this run uses (its algorithm, model, dataset or
        partition kind): what produced it besides fedbench (summary.json's `plugins`)."""
        return plugins.used(
            [
                ("algorithm", self.algorithm.name),
                ("model", self.model.name),
                ("dataset", self.data.name),
                ("partition kind", self.partition.kind),
            ]
        )

    def _with_plugin_code(self, data: dict[str, Any]) -> dict[str, Any]:
        """`data` with the code identity of the plugins this run uses, so that the run id
        changes when their code does; a run of built-in names hashes as before (no key)."""
        used = self.used_plugins()
        return {**data, "plugin_code": [p.code_id for p in used]} if used else data

    def run_id(self, *, legacy: bool = False) -> str:
        """Readable prefix + a hash of everything that can change the results (`X` with a
        privacy section is filed as its twin `dp_X`: one computation, one id). `legacy`: the id
        this config had before ids left out the partition settings its kind does not read (a
        shards run named and hashed partition.alpha); RunFolder.for_config finds runs filed
        under it."""
        # (Client-level privacy is not dp_X: that twin privatises gradients.)
        sample_level = self.privacy is not None and self.privacy.level == "sample"
        cfg = self.model_copy(update={"algorithm": private_identity(self.algorithm, sample_level)})
        data = cfg._results_data(legacy=legacy)
        hashed = cfg._with_plugin_code(data)
        digest = hashlib.sha1(json.dumps(hashed, sort_keys=True).encode()).hexdigest()[:10]
        dataset = cfg.data.name.replace("/", "-")
        from fedbench.run_name import readable_label

        # The short settings that differ from the defaults, among those that act on the run.
        label = readable_label(cfg, None if legacy else data)
        return f"{cfg.algorithm.name}{label}-{dataset}-{cfg.model.name}-s{cfg.seed}-{digest}"

    def acting_data(self) -> dict[str, Any]:
        """The config as a dict without the fields that do not act on the run's results (speed
        and memory settings, partition settings its kind does not read, fields added later at
        their no-op value): what run_id hashes and what a report states."""
        return self._results_data()

    def _results_data(self, *, legacy: bool = False) -> dict[str, Any]:
        data = self.to_dict()
        _drop_speed_settings(data["runtime"])
        _drop_noop_additions(data)
        # The partition settings its kind does not read (partitions.reads); ids issued before
        # that declaration (legacy) hashed alpha for every kind.
        read = settings_read(PARTITIONS.get(self.partition.kind))
        for key in KIND_SETTINGS:
            if key not in read and not (legacy and key == "alpha"):
                data["partition"].pop(key)
        if self.privacy is not None:
            for key in _unhashed_privacy(self.privacy):
                data["privacy"].pop(key)
        revised = self._revised_rules()
        if revised:
            data["revised"] = revised
        return data

    def _revised_rules(self) -> list[str]:
        """Rules corrected after run ids were first issued, named only where the correction
        changes what this run computes: a finished run of the old rule then has another id and
        is trained again, never reused (runs the correction leaves alone keep their ids)."""
        revised = []
        base = self.algorithm.name.removeprefix("dp_")
        client_level = self.privacy is not None and self.privacy.level == "client"
        if base == "fednova" and (client_level or self.fl.local_steps_min is not None):
            revised.append("fednova-public-tau")  # clip K d_i only; upload K d_i, not d_i
        if client_level and self.privacy is not None and self.privacy.sampling == "poisson":
            revised.append("client-poisson-sampling")  # was ignored at client level
        if self.eval.diagnostics:
            revised.append("relative-drift")  # a diagnostic the figures' claims now read
        if self.partition.kind == "shards" and self.partition.samples_per_client is not None:
            revised.append("shards-of-all-data")  # sample within shards of the whole set
        return revised


# ---------------------------------------------------------------------------------------------
# Loading and overrides


def read_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping; a missing or malformed file (or a duplicate key) is a FedbenchError
    (exit code 2)."""
    from fedbench.readback import read_bytes

    if not path.exists():
        raise FedbenchError(f"config file {path} not found; give the path of a YAML run config")
    # A regular file of bounded size, before PyYAML builds it in memory (fedbench.yaml_safe).
    fix = f"give the path of a YAML file (of at most {MAX_YAML_BYTES // 2**20} MiB)"
    raw = read_bytes(path, fix=fix, limit=MAX_YAML_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FedbenchError(
            f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
            "save it as UTF-8"
        ) from None
    try:
        data = load_yaml(text)  # fedbench.yaml_safe: safe, bounded
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid syntax"
        raise FedbenchError(f"malformed YAML in {path}{where}: {problem}; fix the file") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise FedbenchError(
            f"{path} must hold a YAML mapping (key: value), not {type(data).__name__}"
        )
    return data


def parse_override(item: str) -> tuple[list[str], Any]:
    """`a.b=value` -> (["a", "b"], value parsed as YAML: null, true, numbers, lists...)."""
    if "=" not in item:
        raise FedbenchError(
            f"override {item!r} has no '='; write {item.strip() or 'key.path'}=VALUE "
            "(--set key.path=value)"
        )
    key, raw = item.split("=", 1)
    path = [part for part in key.strip().split(".")]
    if not key.strip() or any(not part for part in path):
        raise FedbenchError(f"override {item!r} has an empty key; write it as --set key.path=value")
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return path, value


def set_path(data: dict[str, Any], path: list[str], value: Any) -> None:
    """Set data[path[0]][path[1]]... = value, creating mappings (or replacing null) on the way."""
    node = data
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of `data` with every `key.path=value` override applied in order."""
    result = copy.deepcopy(data)
    for item in overrides:
        path, value = parse_override(item)
        set_path(result, path, value)
    return result


def format_validation_error(
    exc: ValidationError, prefix: str = "", model: type[BaseModel] | None = None
) -> str:
    """One line for the first error of a pydantic ValidationError (of `model`, when given: an
    unknown key then lists the closest keys of its section)."""
    err = exc.errors()[0]
    loc = ".".join(str(part) for part in (*([prefix] if prefix else []), *err["loc"]))
    if err["type"] == "extra_forbidden":
        if model is not None:
            return unknown_field(model, err["loc"], prefix)
        return f"unknown config field {loc!r}; check its spelling against the config reference"
    msg = err["msg"]
    if err["type"] == "missing":
        return f"config field {loc!r} is required"
    return f"invalid config value for {loc!r}: {msg} (got {err.get('input')!r})"


def parse_run_config(data: dict[str, Any], previous_algorithm: str | None = None) -> RunConfig:
    """Validate a raw mapping into a RunConfig, turning errors into one-line FedbenchErrors.

    `previous_algorithm`: the algorithm the config named before a `--set algorithm.name=...`, so
    that a field left over from it is reported as such."""
    if "table" in data or "methods" in data:
        raise FedbenchError("this is a table config; run it with `fedbench run TABLE`")
    algorithm = data.get("algorithm")
    if algorithm is not None and not isinstance(algorithm, dict):
        raise FedbenchError("config field 'algorithm' must be a mapping with a `name`")
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = err["loc"]
        if err["type"] == "extra_forbidden" and len(loc) == 2 and loc[0] == "algorithm":
            # The section's own model knows the fields, and which algorithm came before.
            fields_of = {n: list(cls.Params.model_fields) for n, cls in ALGORITHMS.items()}
            name = algorithm_name(algorithm)
            message = unknown_algorithm_field(str(loc[1]), name, fields_of, previous_algorithm)
            raise FedbenchError(message) from None
        raise FedbenchError(format_validation_error(exc, model=RunConfig)) from None


def load_run_config(path: Path | None, overrides: list[str] | None = None) -> RunConfig:
    """The resolved run config of `fedbench train [CONFIG] [--set k=v]...`."""
    data = read_yaml(path) if path is not None else {}
    section = data.get("algorithm")
    previous = algorithm_name(section) if isinstance(section, dict) else None
    return parse_run_config(apply_overrides(data, overrides or []), previous)
