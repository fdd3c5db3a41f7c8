"""The algorithm contract (docs/extending.md, "The algorithm contract").

An algorithm owns its validated hyperparameters, its server state, the per-client state it keeps
across rounds, the local rule applied after each gradient, what a client uploads and the server
aggregation. The engine owns everything else. States are plain dicts of tensors / lists of
tensors so that checkpoints load with `torch.load(weights_only=True)`, and local rules are
written over lists of tensors (torch._foreach_*) so the same rule serves every engine.

Every hook the engine, the planner or the CLI reads is declared here (a ClassVar or a method with
a default), so a subclass states what it changes and nothing is probed with getattr.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

import numpy as np
import torch
from torch import Tensor

from fedbench.algorithms.hyperparams import AlgorithmConfig, schedule_factor
from fedbench.step.clipping import client_norm, per_row

Tensors = list[Tensor]
#: Tensors a function reads, or updates in place without changing the sequence: a list, or the
#: tuple that a `torch._foreach_*` op returns (the type torch's own foreach signatures take).
TensorSeq = list[Tensor] | tuple[Tensor, ...]
#: What a client uploads (`Algorithm.client_end`): the tensors of each key.
Upload = dict[str, TensorSeq]
State = dict[str, Any]
#: A step scalar (eta_r, a bias correction, the step count k): a Python number in the eager
#: loop, a 0-d float64 tensor on the parameters' device in a captured step
#: (fedbench.engine.captured), where a Python number would be frozen into the compiled graph.
Scalar = float | Tensor


@dataclass(frozen=True)
class ParamSpec:
    """The trainable parameters of the model, as the algorithms see them."""

    names: list[str]
    shapes: list[torch.Size]
    #: Number of attention heads per parameter name where the model knows it (Hessian blocks).
    heads: dict[str, int]
    #: The names of the model's head (its final classification layer), as its model family
    #: defines it (fedbench.personal.heads); empty for a model of no known family.
    head_params: frozenset[str] = frozenset()
    #: The trainable parameter names of the model's BatchNorm layers (their weight and bias),
    #: and the positions of their buffers (running mean, variance, batch count) among the
    #: model's state_dict buffers in the engine's order (FedBN keeps both on the clients).
    batchnorm_params: frozenset[str] = frozenset()
    batchnorm_buffers: tuple[int, ...] = ()

    @property
    def d(self) -> int:
        return sum(int(torch.Size(s).numel()) for s in self.shapes)


@dataclass(frozen=True)
class RoundInfo:
    """What a rule may know about the current round r (0-based).

    `lr` is eta_r. With `lr_schedule_scope: local` the lr also varies over the K local steps:
    the engine hands each local step `at_step(k)`, whose `lr` is eta_{r,k}, and server rules
    that divide Delta by the summed step sizes use `lr_sum` (K * eta_r when the lr is constant
    within the round).

    Inside a captured step (fedbench.engine.captured, the vectorised engine's compiled whole
    step) `round` and `lr` are 0-d float64 device tensors, so that the compiled graph freezes
    neither: a local rule reads them as `Scalar`s. Everywhere else (the engine, the server
    rules, client_begin / client_end) they are Python numbers; code there that needs the int
    reads `round_index`."""

    round: int | Tensor
    lr: Scalar
    local_steps: int
    num_clients: int
    sampled: int
    #: Std of the DP noise in each coordinate of g (sigma*C/B; 0 without privacy).
    grad_noise_std: float = 0.0
    #: The schedule over the local steps ("constant": eta_r at every step; "cosine", "exp").
    step_schedule: str = "constant"
    step_decay: float = 1.0
    #: sum_k eta_{r,k}, kept by at_step (the local steps' infos know their round's sum).
    lr_total: Scalar | None = None
    #: The run's K (fl.local_steps) when `local_steps` is this client's own K_i
    #: (fl.local_steps_min); None: the two are the same.
    nominal_steps: int | None = None

    @property
    def round_index(self) -> int:
        """r as a Python int, outside a captured step (where `round` is a 0-d tensor)."""
        if isinstance(self.round, Tensor):
            raise TypeError("RoundInfo.round is a 0-d tensor in a captured step: read `round`")
        return self.round

    def step_lr(self, k: int) -> Scalar:
        """eta_{r,k} of local step k = 1..K (a 0-d tensor when `lr` is one)."""
        return self.lr * schedule_factor(
            self.step_schedule, self.step_decay, k - 1, self.local_steps
        )

    @property
    def run_steps(self) -> int:
        """K of the run (fl.local_steps), whatever this client's own K_i."""
        return self.local_steps if self.nominal_steps is None else self.nominal_steps

    @property
    def lr_sum(self) -> Scalar:
        """sum_{k=1..K} eta_{r,k}: the step-size sum that turns Delta into a mean gradient (a
        0-d tensor when `lr` is one)."""
        if self.lr_total is not None:
            return self.lr_total
        if self.step_schedule == "constant":
            return self.local_steps * self.lr
        return sum(self.step_lr(k) for k in range(1, self.local_steps + 1))

    def at_step(self, k: int) -> RoundInfo:
        """The info local step k sees: lr = eta_{r,k} (itself when the lr is constant)."""
        if self.step_schedule == "constant":
            return self
        return replace(self, lr=self.step_lr(k), step_schedule="constant", lr_total=self.lr_sum)


class GradientOracle(Protocol):
    """What an executor hands `Algorithm.local_step_with_oracle`: called, g at the current y on
    the step's batch (clipped, or privatised, as every gradient of the run; each call on the same
    batch); and the reductions a rule makes over ONE client's parameters.

    `rows` is None where y holds one client's tensors (the sequential executor), else the number
    of stacked rows (the vectorised executor, seeds trained together): every tensor of y, g and
    the local state then has a leading dimension of `rows`, one client of one run per row. A rule
    that reduces over a client's parameters (SAM's ||g1||) writes the reduction with `norm` and
    applies it with `scale`, and is elementwise (torch._foreach_*) elsewhere: written once, it
    computes each row as that client alone. `StepOracle` is the executors' implementation."""

    rows: int | None

    def __call__(self) -> Tensors: ...

    def norm(self, tensors: TensorSeq) -> Tensor:
        """||t||_2 over all of one client's tensors: a 0-d tensor, or one per row (shape
        (rows,)) on stacked rows. No host sync."""
        ...

    def scale(self, tensors: TensorSeq, factor: Tensor) -> Tensors:
        """Each tensor times its client's factor: a 0-d tensor, or one per row as `norm`
        returns them (a new list; the tensors are unchanged)."""
        ...

    def dot(self, a: TensorSeq, b: TensorSeq) -> Tensor:
        """<a, b> over all of one client's tensors: a 0-d tensor, or one per row (shape
        (rows,)) on stacked rows (APFL's gradient of its mixing weight). No host sync."""
        ...

    def full(self) -> Tensors:
        """The gradient of the client's mean objective over ALL its local samples at the current
        y (MimeLite's grad f_i(x) with `full_batch_gradient`), clipped as a step's gradient; no
        augmentation, and the model's buffers are left as they were. For a `FullGradientRule`
        (fedbench.algorithms.full_gradient; refused with sample-level DP)."""
        ...


class StepOracle:
    """The `GradientOracle` of every executor (and of the tests that train one client): g from
    `compute`, the full local-data gradient from `full` (None: not offered), reductions per
    client over `rows` stacked rows (None: one client)."""

    def __init__(
        self,
        compute: Callable[[], Tensors],
        rows: int | None = None,
        full: Callable[[], Tensors] | None = None,
    ) -> None:
        self.compute = compute
        self.rows = rows
        self._full = full

    def __call__(self) -> Tensors:
        return self.compute()

    def full(self) -> Tensors:
        if self._full is None:
            raise TypeError("this executor offers no full local-data gradient here")
        return self._full()

    def norm(self, tensors: TensorSeq) -> Tensor:
        return client_norm(tensors, self.rows)

    def dot(self, a: TensorSeq, b: TensorSeq) -> Tensor:
        if self.rows is None:
            return torch.stack([(s * t).sum() for s, t in zip(a, b, strict=True)]).sum()
        rows = self.rows
        per_tensor = [(s * t).reshape(rows, -1).sum(dim=1) for s, t in zip(a, b, strict=True)]
        return torch.stack(per_tensor).sum(dim=0)

    def scale(self, tensors: TensorSeq, factor: Tensor) -> Tensors:
        if self.rows is None:
            return list(torch._foreach_mul(tensors, factor))
        return [t * per_row(factor, t) for t in tensors]


@dataclass(frozen=True)
class Floats:
    """A number of floats as `d` times the trainable parameters plus `blocks` times B, the
    number of second-moment blocks (FedAdamW), plus `local` times L, the floats of the tensors
    a split-model method keeps off the wire (its personal part, or FedBABU's frozen head:
    `Algorithm.n_local`): the unit of comm_up and comm_down."""

    d: int = 0
    blocks: int = 0
    local: int = 0

    def __add__(self, other: Floats) -> Floats:
        return Floats(self.d + other.d, self.blocks + other.blocks, self.local + other.local)

    def count(self, d: int, blocks: int, local: int = 0) -> float:
        return float(self.d * d + self.blocks * blocks + self.local * local)

    def __str__(self) -> str:
        text = ""
        for coef, symbol in ((self.d, "d"), (self.blocks, "B"), (self.local, "L")):
            if not coef:
                continue
            size = abs(coef)
            term = f"{'' if size == 1 else size}{symbol}"
            sign = "-" if coef < 0 else "+"
            text = f"{text} {sign} {term}" if text else (term if coef > 0 else f"-{term}")
        return text or "0"


@dataclass(frozen=True)
class ClientUpload:
    """One sampled client's upload, as `server_update_with_uploads` receives it."""

    client: int
    #: The client's aggregation weight: 1, or n_i with `weighting: samples`.
    weight: float
    tensors: dict[str, Tensors]

    @classmethod
    def kept(cls, client: int, weight: float, upload: Mapping[str, TensorSeq]) -> ClientUpload:
        """A copy the engine can keep until the server step: an upload may alias tensors that
        the next client overwrites (the resident model, a stacked local state)."""
        return cls(client, weight, {k: [t.detach().clone() for t in v] for k, v in upload.items()})


class Algorithm(ABC):
    """Base class: FedAvg's upload (Delta_i) and server step x <- x + eta_g * Delta_bar."""

    Params: ClassVar[type[AlgorithmConfig]] = AlgorithmConfig
    #: The paper that defines the algorithm (shown by `fedbench list algorithms`).
    paper: ClassVar[str] = ""
    #: Human-readable per-client state kept across rounds ("-" if none).
    client_state_desc: ClassVar[str] = "-"
    #: comm_up of the default hyperparameters in units of d (B = number of blocks), shown by
    #: `fedbench list algorithms`. Derived from `upload_size`, never set by hand.
    comm_up_label: ClassVar[str] = "d"
    #: The run needs a `privacy:` section (the dp_ variants); the engine privatises g.
    requires_privacy: ClassVar[bool] = False
    #: A dp_<name> twin (this algorithm fed with the privatised gradient) is registered
    #: automatically; set False where the rule makes no sense on noisy gradients.
    supports_privacy: ClassVar[bool] = True
    #: Set on a plain dp_ twin (registered by `register_dp`): the algorithm it equals when that
    #: one runs with a `privacy:` section. Run ids hash the two as one computation.
    dp_twin_of: ClassVar[str | None] = None
    #: Gradients a local step takes on its one batch (FedSAM, FAFED: 2): each is privatised
    #: with its own noise in a private run, and the accountant counts the step as ONE release
    #: of that many gradients of one batch (fedbench.privacy.accounting). See `round_gradients`.
    gradients_per_step: ClassVar[int] = 1
    #: The first rounds of a run whose steps take other numbers of gradients than every later
    #: round's (`round_gradients`; FAFED: 1, its initial exchange).
    initial_rounds: ClassVar[int] = 0
    #: False when `local_step` is not elementwise over the tensors it gets (it mixes entries
    #: of a tensor, e.g. an FFT), so it cannot run on the vectorised engine's stacked clients.
    #: A rule with several gradients per step stays True: the stacked executor hands it a
    #: gradient oracle over the rows, whose `norm` / `scale` reduce per client.
    supports_vectorized: ClassVar[bool] = True
    #: True: the engine keeps every sampled client's upload for `server_update_with_uploads`
    #: (S uploads in memory at once instead of the streaming mean's one).
    uses_client_uploads: ClassVar[bool] = False
    #: Upload keys that carry nothing private (FedNova's tau_i, a function of the seed only):
    #: client-level DP neither clips nor noises them, and the server sees their exact mean.
    public_uploads: ClassVar[frozenset[str]] = frozenset()
    #: Upload keys whose values are non-negative by construction (second moments v). A noisy
    #: mean of them (client-level DP) can dip below 0, where sqrt(v) is NaN; the mechanism
    #: clamps their privatised mean at 0, post-processing that costs no privacy. Without
    #: noise the mean of non-negative values is non-negative and the clamp changes nothing.
    nonnegative_uploads: ClassVar[frozenset[str]] = frozenset()
    #: True: a local step also takes gradients under other weights than the client's y, put
    #: into the resident model for the call (a personal model: Ditto, APFL, pFedMe). In train
    #: mode those forwards would move the model's BatchNorm running statistics, which are the
    #: global model's: the setup refuses models with running statistics, as for MOON's anchors.
    evaluates_other_weights: ClassVar[bool] = False
    #: True: `local_step` accepts its step scalars (k, info.lr, info.round) as 0-d tensors
    #: (`Scalar`; written with `add_scaled_`, `addcdiv_scaled_`, `sqrt`), so the whole client
    #: step compiles into one graph (`runtime.compile`; fedbench.engine.captured). Set where
    #: tests/engine/test_captured.py shows 0 graph breaks and the eager result; inherited, so a
    #: subclass that changes `local_step` must check it again.
    capturable_step: ClassVar[bool] = False
    #: True: the method keeps a personal part of the model on each client (fedbench.personal:
    #: a head, BN statistics, a full personal model). The executors load it over x before the
    #: client trains (`load_client`), it lives in the client's stored state (never uploaded,
    #: never aggregated), and the evaluation reads client i's model as x plus that part.
    personalises: ClassVar[bool] = False
    #: True: the rule needs each client's training class counts (FedRoD's balanced softmax):
    #: the run's setup hands them over once (`set_class_counts`, N x C, from the partition),
    #: and `new_client_state` puts a client's own into its first stored state.
    uses_class_counts: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("comm_up", "comm_down", "comm_up_label"):
            if name in cls.__dict__:
                raise TypeError(
                    f"{cls.__name__} sets {name}; declare upload_size / download_size instead "
                    "so that the label and the count cannot disagree"
                )
        cls.comm_up_label = str(cls.upload_size(cls.Params()))

    def __init__(self, params: AlgorithmConfig, spec: ParamSpec, *, num_clients: int) -> None:
        self.params = params
        self.spec = spec
        self.num_clients = num_clients

    # --- communication (floats per participating client per round; docs/extending.md) -------
    @classmethod
    def upload_size(cls, params: AlgorithmConfig) -> Floats:
        """What one client uploads per round under `params` (default: Delta_i, d floats)."""
        return Floats(d=1)

    @classmethod
    def download_size(cls, params: AlgorithmConfig) -> Floats:
        """What the server sends one client per round under `params` (default: x, d floats)."""
        return Floats(d=1)

    def n_blocks(self) -> int:
        """B, the number of second-moment blocks in the sizes above (0: no blocks)."""
        return 0

    def n_local(self) -> int:
        """L, the floats of the tensors that never go over the wire (0: none; the split-model
        methods of fedbench.algorithms.split)."""
        return 0

    def comm_up(self) -> float:
        return self.upload_size(self.params).count(self.spec.d, self.n_blocks(), self.n_local())

    def comm_down(self) -> float:
        return self.download_size(self.params).count(self.spec.d, self.n_blocks(), self.n_local())

    # --- server -------------------------------------------------------------------------------
    def init_server_state(self, x: Tensors) -> State:
        return {}

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        """Default server step x <- x + eta_g * Delta_bar, in place; `mean` holds the (weighted)
        mean over the sampled clients of every key they uploaded."""
        torch._foreach_add_(x, mean["delta"], alpha=self.params.server_lr)

    def server_update_with_uploads(
        self,
        x: Tensors,
        mean: dict[str, Tensors],
        uploads: Sequence[ClientUpload],
        server: State,
        info: RoundInfo,
    ) -> None:
        """The server step the engine calls once per round. `uploads` holds every sampled
        client's upload when `uses_client_uploads` is set (else it is empty); by default the
        step needs only the mean and is `server_update`."""
        self.server_update(x, mean, server, info)

    # --- client -------------------------------------------------------------------------------
    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        """The local state of one client for one round (optimizer moments, corrections...)."""
        return {}

    @abstractmethod
    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        """Update y in place after gradient g of local step k (1-based); g may be overwritten.
        k is a Python int, or a 0-d tensor when the rule sets `capturable_step` and the step is
        captured (`Scalar`)."""

    @classmethod
    def round_gradients(
        cls, round_index: int, local_steps: int, params: AlgorithmConfig | None = None
    ) -> dict[int, int]:
        """{g: how many of round r's K local steps call the gradient oracle g times}: what a
        client privatises in the round, all g gradients of a step on that step's batch. Every
        round from `initial_rounds` on is the same. Default: {gradients_per_step: K}. The
        privacy accountant composes this; the sequential executor checks it against the
        oracle's calls in every private client round, so that a rule whose calls disagree with
        it fails rather than report a wrong epsilon. `params`: the run's hyperparameters, for a
        rule whose count depends on them (pFedMe's inner_steps); None: the defaults."""
        return {cls.gradients_per_step: local_steps}

    def local_step_with_oracle(
        self,
        y: Tensors,
        gradient: GradientOracle,
        local: State,
        k: Scalar,
        info: RoundInfo,
    ) -> None:
        """Local step k given the gradient oracle (`GradientOracle`: calling it computes g at
        the current y on the step's batch): every executor's entry point, on one client's
        tensors or on stacked rows. Default: one gradient, then `local_step`. Rules that need
        several gradients per step (FedSAM, FAFED) override this and set `gradients_per_step`;
        a reduction over a client's parameters goes through `gradient.norm` / `.scale`, so that
        the override runs on stacked rows unchanged."""
        g = gradient()
        with torch.no_grad():
            self.local_step(y, g, local, k, info)

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        """What the client uploads and its new persistent state (None: keep nothing). The engine
        averages every uploaded key; "delta" (y - x) is required: it is checked for finiteness
        and is the update most server steps apply."""
        return {"delta": torch._foreach_sub(y, x)}, client_state

    def new_client_state(self, client: int, x: Tensors) -> State | None:
        """The stored state of client `client` before its first round (None: none, the
        default). The round protocol hands it to `client_begin` in place of None, so that a
        rule may start from something of that client's (FedRoD: its class counts) without
        being told which client it begins; it is stored only by `client_end`, like any state."""
        return None

    def set_class_counts(self, counts: np.ndarray) -> None:
        """With `uses_class_counts`: every client's training class counts (N x C)."""
        raise NotImplementedError(f"{type(self).__name__} sets no uses_class_counts")

    def load_client(self, y: TensorSeq, buffers: Sequence[Tensor], stored: State | None) -> None:
        """With `personalises`: client i's model from the global one. y (the trainable
        parameters, in the spec's order) and buffers (the state_dict buffers) hold x when
        called; the method writes its personal part over them in place from the client's stored
        state (None: a client that never trained). Called by every executor before the client's
        first step (on a stacked row's views in the vectorised one) and, unless the method
        overrides `load_personalised`, by the evaluation."""
        return None

    def local_buffers(self) -> frozenset[int]:
        """Positions (in the state_dict buffers' order) of the buffers that stay on the
        clients: left out of the round's mean, so the server's copies never change (FedBN's
        BatchNorm statistics, which `load_client` / `store_buffers` keep per client)."""
        return frozenset()

    def load_personalised(
        self, y: TensorSeq, buffers: Sequence[Tensor], stored: State | None
    ) -> None:
        """With `personalises`: client i's personalised model as the evaluation tests it, written
        over x in place like `load_client`. Default: `load_client` (the model the client trains
        from is the one it is tested with). Methods whose client trains from x but is tested
        with a model of its own override it: Ditto's v_i, APFL's mixture, pFedMe's theta_i."""
        self.load_client(y, buffers, stored)

    def store_buffers(self, state: State | None, buffers: Sequence[Tensor]) -> State | None:
        """With `personalises`: the state to store for the client given its trained buffers
        (views the next client may overwrite: clone what is kept). A method that keeps BN
        statistics personal (FedBN) adds them here. Default: the state unchanged."""
        return state

    # --- diagnostics ------------------------------------------------------------------------------
    def v_block_means(self, local: State) -> Tensor | None:
        """The block means of this client's second moment v after its K steps (FedAdamW Figure 2,
        `v_spread`); None for algorithms that keep no v."""
        return None


def tensor_means(tensors: Tensors) -> Tensor:
    """One mean per tensor, as one vector (the `tensor` block partition)."""
    return torch.stack([t.mean() for t in tensors])


def squared_norm(tensors: TensorSeq) -> Tensor:
    """||t||^2 summed over the tensors, in float64 (one value; no host sync)."""
    return torch.stack([n.double() for n in torch._foreach_norm(tensors)]).square().sum()


def mean_gradient(mean_delta: Tensors, info: RoundInfo) -> Tensors:
    """-Delta_bar / sum_k eta_{r,k}: the round's mean update as a mean local gradient, the global
    direction of the next round (FedCM's d_r, FedLADA's g_a, FedAdamW's Delta_G)."""
    return list(torch._foreach_mul(mean_delta, -1.0 / info.lr_sum))


def zeros_like(tensors: Tensors) -> Tensors:
    return [torch.zeros_like(t) for t in tensors]


def add_coupled_decay_(g: Tensors, y: Tensors, weight_decay: float) -> None:
    """Coupled (L2) weight decay: g <- g + lambda * y (SGD, Adam, FedLADA)."""
    if weight_decay:
        torch._foreach_add_(g, y, alpha=weight_decay)


def add_scaled_(y: TensorSeq, t: TensorSeq, scale: Scalar) -> None:
    """y <- y + scale * t, for a Python scale (one fused op, as before) or a 0-d tensor."""
    if isinstance(scale, Tensor):
        torch._foreach_add_(y, torch._foreach_mul(t, scale))
    else:
        torch._foreach_add_(y, t, alpha=scale)


def addcdiv_scaled_(y: TensorSeq, a: TensorSeq, b: TensorSeq, scale: Scalar) -> None:
    """y <- y + scale * a / b, for a Python scale (one fused op, as before) or a 0-d tensor."""
    if isinstance(scale, Tensor):
        quotient = torch._foreach_div(a, b)
        torch._foreach_mul_(quotient, scale)
        torch._foreach_add_(y, quotient)
    else:
        torch._foreach_addcdiv_(y, a, b, value=scale)


def sqrt(value: Scalar) -> Scalar:
    """The square root of a Python number or of a 0-d tensor."""
    return value.sqrt() if isinstance(value, Tensor) else math.sqrt(value)
