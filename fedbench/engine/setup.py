"""Everything a run needs, built and validated before anything is written to disk."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from torch import Tensor, nn

from fedbench.algorithms import ALGORITHMS, Algorithm, ParamSpec
from fedbench.algorithms.representation import uses_representation
from fedbench.config import RunConfig
from fedbench.data import Dataset
from fedbench.data.client_test import ClientTestSplit, split_client_test
from fedbench.data.partition import class_counts, partition
from fedbench.data.validation import run_data
from fedbench.engine.schedule import ClientSchedule, client_schedule, clients_per_round
from fedbench.errors import FedbenchError
from fedbench.models import build_model
from fedbench.models.representation import check_anchor_statistics
from fedbench.personal.heads import head_names
from fedbench.personal.setup import personal_setup
from fedbench.privacy.client_level import ClientLevelPlan, poisson_clients_of
from fedbench.privacy.plan import PrivacyPlan, plan_privacy


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise FedbenchError(
            f"runtime.device {name!r} is not a device; use auto, cpu or cuda[:N]"
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise FedbenchError(
            f"runtime.device is {name} but no CUDA GPU is available; use auto or cpu"
        )
    return device


def param_spec(model: nn.Module) -> ParamSpec:
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    heads = {}
    # Every parameter inside an attention module (timm `num_heads`, HF `num_attention_heads`)
    # gets its head count; the innermost such module wins (named_modules lists parents first).
    for module_name, module in model.named_modules():
        count = getattr(module, "num_heads", None) or getattr(module, "num_attention_heads", None)
        if isinstance(count, int):
            for pname, _ in module.named_parameters():
                heads[f"{module_name}.{pname}" if module_name else pname] = count
    norms = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, nn.modules.batchnorm._BatchNorm)
    ]
    trainable = {n for n, _ in named}
    norm_params = {
        f"{name}.{pname}" if name else pname
        for name, module in norms
        for pname, _ in module.named_parameters(recurse=False)
    }
    norm_buffers = {
        f"{name}.{bname}" if name else bname
        for name, module in norms
        for bname, _ in module.named_buffers(recurse=False)
    }
    in_state = set(model.state_dict())
    buffer_names = [n for n, _ in model.named_buffers() if n in in_state]  # the engine's order
    return ParamSpec(
        names=[n for n, _ in named],
        shapes=[p.shape for _, p in named],
        heads=heads,
        head_params=head_names(model),
        batchnorm_params=frozenset(norm_params & trainable),
        batchnorm_buffers=tuple(j for j, n in enumerate(buffer_names) if n in norm_buffers),
    )


def model_and_spec(cfg: RunConfig) -> ParamSpec:
    """The ParamSpec of the configured model on the configured data (`fedbench blocks`)."""
    data = run_data(cfg)
    input_shape = data.input_shape
    if cfg.data.image_size is not None and len(input_shape) == 3:
        input_shape = (input_shape[0], cfg.data.image_size, cfg.data.image_size)
    return param_spec(build_model(cfg.model, input_shape, data.num_classes))


class ClientSamples(Sequence[Tensor]):
    """Each client's training-sample indices as a device tensor.

    All clients' indices are copied to the device once, as one flat tensor (the size of the
    training set, whatever the number of clients), and a client's are a view of it. Copying a
    client's numpy indices when it is sampled would be a blocking host-to-device copy from
    pageable memory at every client of every round: CUDA's sync debug mode flags it, and the
    host waits for the device there."""

    def __init__(self, parts: list[np.ndarray], device: torch.device) -> None:
        self.parts = parts
        self.device = device
        sizes = [len(p) for p in parts]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).tolist()
        flat = np.concatenate(parts) if parts else np.zeros(0)
        self.flat = torch.as_tensor(flat.astype(np.int64, copy=False), device=device)

    def __len__(self) -> int:
        return len(self.parts)

    # An index only, no slices: narrower than Sequence's overloaded __getitem__ (hence ignore).
    def __getitem__(self, i: int) -> Tensor:  # type: ignore[override]
        if not -len(self.parts) <= i < len(self.parts):
            raise IndexError(i)
        i %= len(self.parts)
        return self.flat[self.offsets[i] : self.offsets[i + 1]]


@dataclass
class RunSetup:
    cfg: RunConfig
    device: torch.device
    data: Dataset
    #: Each client's training-sample indices, on the device (made on access).
    clients: Sequence[Tensor]
    client_sizes: list[int]
    partition_arrays: list[np.ndarray]
    model: nn.Module
    algorithm: Algorithm
    schedule: ClientSchedule
    prepare: Callable[[Tensor], Tensor] | None
    #: Resolved DP settings (sample or client level); None for a non-private run.
    privacy: PrivacyPlan | ClientLevelPlan | None = None
    #: Each client's own test data (eval.per_client); None when the run has none.
    client_test: ClientTestSplit | None = None
    #: The clients held out of training (`eval.unseen_clients`; fedbench.personal.setup).
    unseen_clients: list[int] = field(default_factory=list)

    @property
    def num_clients(self) -> int:
        return len(self.clients)


def _resizer(size: int | None, input_shape: tuple[int, ...]) -> Callable[[Tensor], Tensor] | None:
    """Resize batches on the device to data.image_size (square), when it differs from the data."""
    if size is None or len(input_shape) != 3 or input_shape[1:] == (size, size):
        return None

    def prepare(x: Tensor) -> Tensor:
        return nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)

    return prepare


def _compose(
    first: Callable[[Tensor], Tensor] | None, second: Callable[[Tensor], Tensor] | None
) -> Callable[[Tensor], Tensor] | None:
    if first is None or second is None:
        return first or second
    return lambda x: second(first(x))


def prepare_run(cfg: RunConfig) -> RunSetup:
    """Load data, partition it, build the model and the algorithm; raise FedbenchError on bad input."""
    device = resolve_device(cfg.runtime.device)
    algorithm_cls = ALGORITHMS.get(cfg.algorithm.name)
    data = run_data(cfg)
    labels = data.y_train.numpy()
    parts = partition(labels, cfg.partition, data.num_classes, data.client_train)
    parts, client_test = split_client_test(cfg, data, parts)
    torch.manual_seed(cfg.seed)  # model initialisation depends on the run seed only
    resize = _resizer(cfg.data.image_size, data.input_shape)
    prepare = _compose(data.prepare, resize)
    input_shape = data.input_shape
    size = cfg.data.image_size
    if resize is not None and size is not None:  # (no resize without an image_size)
        input_shape = (input_shape[0], size, size)
    model = build_model(cfg.model, input_shape, data.num_classes).to(device)
    if uses_representation(algorithm_cls) or algorithm_cls.evaluates_other_weights:
        check_anchor_statistics(model, cfg.model.name, cfg.algorithm.name)
    spec = param_spec(model)
    algorithm = algorithm_cls(cfg.algorithm, spec, num_clients=len(parts))
    if algorithm_cls.uses_class_counts:  # counted on the training split (client_test apart)
        algorithm.set_class_counts(class_counts(parts, labels, data.num_classes))
    unseen = personal_setup(cfg, algorithm, len(parts), client_test)
    members = len(parts) - len(unseen)
    sampled = clients_per_round(cfg.fl.participation, members)
    schedule = client_schedule(
        cfg.seed,
        cfg.fl.rounds,
        len(parts),
        sampled,
        cfg.fl.dropout,
        poisson_clients_of(cfg.privacy),
    )
    if unseen:
        schedule = replace(schedule, members=tuple(sorted(set(range(len(parts))) - set(unseen))))
    privacy = plan_privacy(cfg, model, algorithm_cls, [len(p) for p in parts], schedule, sampled)
    data = data.to(device)
    return RunSetup(
        cfg=cfg,
        device=device,
        data=data,
        clients=ClientSamples(parts, device),
        client_sizes=[len(p) for p in parts],
        partition_arrays=parts,
        model=model,
        algorithm=algorithm,
        schedule=schedule,
        prepare=prepare,
        privacy=privacy,
        client_test=client_test,
        unseen_clients=unseen,
    )
