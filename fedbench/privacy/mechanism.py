"""Sample-level DP gradients (docs/algorithms.md, "Differential privacy"; DP-FedAdamW paper, Eq. 3).

Each local step:
    g_j      = grad of the loss of sample j           (per-sample, torch.func vmap(grad))
    g_j     <- g_j / max(1, ||g_j||_2 / C)            (norm over all trainable parameters)
    g_tilde  = (sum_j g_j + N(0, sigma^2 C^2 I)) / B

B is the configured batch size (the expected one under Poisson sampling, as Opacus divides by
it). The noise comes from a generator seeded by (seed, round, client), so a rerun or a resumed
run draws the same noise.

sum_j clip(g_j) is computed one of three ways, all exact:
- `bk` (book-keeping clipping, Bu et al. 2023, "Differentially private optimization on large
  model at small cost"; fedbench.privacy.book_keeping): one forward pass records each trainable
  layer's input, one backward pass gives each layer's output gradient (and no parameter
  gradient); per layer the per-sample norms come from these (ghost norm or materialised
  per-sample gradient), and each layer's clipped sum sum_j c_j g_j is formed directly from them
  with c_j = 1 / max(1, ||g_j|| / C). Layers: Linear (LoRA's too), Conv2d, GroupNorm,
  LayerNorm, Embedding. Cost: one forward and one backward pass, plus the per-layer work.
- `ghost` (Opacus' fast gradient clipping; ghost clipping, Li et al. 2022): the per-sample norms
  from Opacus' hooks during one backward pass (Conv2d by `conv_norms`), then a second backward
  pass of sum_j c_j * loss_j. Cost: one forward and two backward passes, plus the norms. Opacus
  has rules for more layer types than bk (Conv1d/3d, InstanceNorm, RNNs, ...).
- `vmap` (any model torch.func can trace): per-sample gradients with torch.func vmap(grad), in
  chunks so that at most about `PER_SAMPLE_BYTES` of them are alive at once; clipping and
  summing per chunk.

The mechanism clips with the method it is given and chooses none: `privacy.clipping: auto` is
the execution plan's rule (fedbench.engine.plan.clipping_method): bk where every trainable layer
has a bk rule, else ghost where Opacus has one for every trainable layer, else vmap. Private / non-private step measured on the CPU (benchmarks/dp_ratio.py; one
thread of a loaded 2-core AMD EPYC, thread CPU time; benchmarks/results/dp-ratio-cpu.md):
    ResNet-18 GN 3x32x32 B 50     bk 1.27x  ghost 2.42x  vmap 3.55x  (H200: ghost 5.8x, vmap 41.5x)
    ViT-Base + LoRA 224 px B 16   bk 0.95x  ghost 1.48x  vmap 0.95x  (H200: ghost 1.65x, vmap 1.46x)
    Swin-Base + LoRA 224 px B 16  bk 0.94x  ghost refused vmap 1.04x  (H200: vmap 2.05x)
    RoBERTa-Base + LoRA 128 B 16  bk 1.02x  ghost 1.57x  vmap cannot trace it
    cnn digits B 32               bk 1.78x  ghost 2.65x  vmap 7.2x
    vit_micro + LoRA B 16         bk 1.60x  ghost 2.61x  vmap 2.74x
bk was the fastest exact method or tied for it (ViT-Base with vmap) on every model, so it comes
first; ghost before vmap because ghost was faster on every model but ViT-Base (and on the H200
on ResNet-18: 5.8x against 41.5x; ViT-Base there, vmap 1.46x against 1.65x, now runs bk).

bk and ghost norms assume that each trainable layer sees the batch as its first dimension, one
row per sample (and, for bk, runs once per forward pass). Layers that reshape the batch break
that: Swin's window attention runs its Linear layers on (B x windows) rows, a sequence-first
layer on (L, B, ...); bk takes k x B rows as k rows of each sample in turn (sample-major), which
a layer that orders them window-major (all samples' first window, then their second) breaks.
So bk and ghost are checked before they are used, on the whole batch as the step sees it:
every per-sample norm must have one entry per sample, and the norms of three samples (the
first, the middle and the last; for bk also their per-sample gradients) must equal the ones from
one backward pass per sample (without dropout, in float32, so that neither enters the
comparison). The row layout of a reshaping layer may depend on the batch size, and a batch of
one sample cannot show it (its rows all belong to that sample, in any order), so the check runs
again at every batch size not checked yet (Poisson sampling: each new size, once) and a run
whose batches all held one sample says so (`PrivateGradient.note`). A model that fails the check
is trained with vmap from then on (`PrivateGradient.fallback` says why); `method="bk"` or
`"ghost"` asked for explicitly fails with that reason instead. Ghost clipping gives every module
that runs in place (`ReLU(inplace=True)`) a copy of its input (fedbench.privacy.in_place), since
Opacus' hooks refuse in-place changes of a layer's output; an in-place operation in a model's
forward code that it cannot reach makes auto use vmap, and ghost asked for fails in one line.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Literal

import torch
from torch import Tensor, nn
from torch.func import grad, vmap
from torch.utils.hooks import RemovableHandle

from fedbench.errors import FedbenchError
from fedbench.privacy.book_keeping import BookKeeper, _PerSample
from fedbench.privacy.in_place import copy_inputs_of_in_place_modules, is_in_place_error
from fedbench.step import Objective, autocast_context, split_model

#: How PrivateGradient computes sum_j clip(g_j) (chosen by fedbench.engine.plan).
Method = Literal["bk", "ghost", "vmap"]

#: Memory for one chunk of per-sample gradients (float32: 4 bytes x d x chunk).
PER_SAMPLE_BYTES = 256 * 2**20
#: Samples of a batch whose bk or ghost norms are compared with one backward pass each
#: (`checked_samples`).
VERIFY_SAMPLES = 3
#: Relative tolerance of that comparison (float32 reductions in different orders).
VERIFY_RTOL = 1e-3
#: Offset mixed into the client key so that noise and batch draws are independent streams.
NOISE_STREAM = 0x5DEECE66D


@contextlib.contextmanager
def _quiet_hooks() -> Iterator[None]:
    """Opacus' backward hooks fire on the first layer too, whose input needs no gradient, and
    torch warns about it at every step: silenced while they run."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Full backward hook is firing", UserWarning)
        yield


def check_no_batchnorm(model: nn.Module, model_name: str, level: str = "sample") -> None:
    """DP cannot train BatchNorm: at sample level a sample's gradient depends on the batch; at
    client level the running statistics would be released without clipping or noise."""
    why = (
        "sample-level DP cannot train (per-sample gradients mix the batch)"
        if level == "sample"
        else "client-level DP cannot release (their running statistics would reach the server "
        "without clipping or noise)"
    )
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            raise FedbenchError(
                f"model {model_name} has BatchNorm layers, which {why}; use model.norm gn"
            )


def chunk_size(d: int, batch: int, budget_bytes: int = PER_SAMPLE_BYTES) -> int:
    """Samples per vmap chunk: all of them when d x B floats fit in the budget."""
    return max(1, min(batch, budget_bytes // max(1, 4 * d)))


def clip_factors(norms: Tensor, clip: float) -> Tensor:
    """1 / max(1, ||g_j|| / C) for each sample j."""
    return torch.clamp(clip / (norms + 1e-12), max=1.0)


def checked_samples(batch: int) -> list[int]:
    """The samples of a batch of `batch` that the exactness check compares (at most
    VERIFY_SAMPLES): the first, the middle and the last, so that rows of several samples grouped
    as one (a window-major layer) show at either end of the batch."""
    return sorted({0, batch // 2, batch - 1})[:VERIFY_SAMPLES]


#: Why ghost clipping cannot run a model whose forward changes a hooked layer's output in place.
IN_PLACE_WHY = (
    "an in-place operation in its forward code changes the output of a layer with trainable "
    "parameters, which Opacus' hooks refuse"
)


def _norms(grads: list[list[Tensor]]) -> Tensor:
    """(B,) norms of per-sample gradients given as one list of tensors per sample."""
    return torch.stack(
        [torch.linalg.vector_norm(torch.cat([g.flatten() for g in sample])) for sample in grads]
    )


def _norm_mismatch(got: Tensor, exact: Tensor, picked: list[int]) -> str | None:
    """Why per-sample norms `got` of the samples `picked` are not the `exact` ones (to
    VERIFY_RTOL), or None."""
    if torch.allclose(got, exact, rtol=VERIFY_RTOL, atol=1e-6 * float(exact.max())):
        return None
    shown = ", ".join(f"{float(a):.4g} vs {float(b):.4g}" for a, b in zip(got, exact, strict=True))
    return f"its per-sample norms differ from the exact ones ({shown} on samples {picked})"


def ghost_supported(model: nn.Module) -> bool:
    """True when Opacus has a norm or per-sample gradient rule for every module that holds
    trainable parameters of its own (so no module needs its functorch fallback)."""
    from opacus.grad_sample import GradSampleModuleFastGradientClipping as Fast

    known = set(Fast.GRAD_SAMPLERS) | set(Fast.NORM_SAMPLERS)
    return all(
        type(m) in known
        for m in model.modules()
        if any(p.requires_grad for p in m.parameters(recurse=False))
    )


class PrivateGradient:
    """Computes g_tilde for the resident model's trainable parameters (one object per run).

    `method`: bk, ghost or vmap, as the execution plan chose it (fedbench.engine.plan; a
    direct caller asks `clipping_method(model)` for auto's choice). `strict`: a batch size where
    bk or ghost is not exact is an error (default: True, a method asked for by name); False:
    the batch falls back to vmap, as `privacy.clipping: auto` does (checked at each batch size
    it meets, see the module docstring).
    """

    def __init__(
        self,
        model: nn.Module,
        params: list[Tensor],
        *,
        noise_multiplier: float,
        clip: float,
        batch_size: int,
        autocast: torch.dtype | None = None,
        method: Method,
        strict: bool = True,
        objective: Objective | None = None,
    ) -> None:
        by_id = {id(p): name for name, p in model.named_parameters()}
        self.names = [by_id[id(p)] for p in params]
        self.model = model
        #: The model's buffers and constants for vmap's functional call (fedbench.step).
        self.split = split_model(model)
        self.params = params
        self.noise_multiplier = noise_multiplier
        self.clip = clip
        self.batch_size = batch_size
        self.autocast = autocast
        #: The loss per sample (fedbench.step.objective: half-precision logits upcast).
        self.objective = objective or Objective()
        self.d = sum(p.numel() for p in params)
        self._per_sample = vmap(
            grad(self._sample_loss), in_dims=(None, None, 0, 0), randomness="different"
        )
        # A run passes its execution plan's method and whether it was asked by name.
        self._strict = strict
        #: Why bk or ghost clipping was not used for a model with their rules (None otherwise).
        self.fallback: str | None = None
        self.method: Method = method
        #: The batch sizes at which bk or ghost clipping was checked exact (module docstring):
        #: a batch of another size is checked before it is clipped.
        self.checked_sizes: set[int] = set()
        self._bk: BookKeeper | None = None
        if method == "bk":
            self._bk = BookKeeper(model, params)
        if method == "ghost" and not ghost_supported(model):
            raise FedbenchError(
                "ghost clipping cannot run this model: Opacus has no rule for one of its layers "
                "with trainable parameters; use privacy.clipping auto"
            )
        self._ghost = None
        self._copies: list[RemovableHandle] = []
        if method == "ghost":
            from opacus.grad_sample import GradSampleModuleFastGradientClipping

            from fedbench.privacy.conv_norms import register

            register()
            # loss_reduction "sum": the hooks see the gradients of each sample's own loss.
            self._ghost = GradSampleModuleFastGradientClipping(
                model,
                batch_first=True,
                loss_reduction="sum",
                max_grad_norm=clip,
                use_ghost_clipping=True,
            )
            # The hooks stay attached (re-attaching them costs as much as a small model's
            # step) but act only inside clipped_sum.
            self._ghost.disable_hooks()
            # Opacus' hooks refuse in-place changes of a hooked layer's output (in_place.py).
            self._copies = copy_inputs_of_in_place_modules(model)

    def close(self) -> None:
        """Detach the hooks that bk or ghost clipping attached to the model (benchmarks that
        try several mechanisms on one model); the object computes nothing afterwards."""
        if self._bk is not None:
            self._bk.remove()
            self._bk = None
        if self._ghost is not None:
            self._ghost.remove_hooks()
            self._ghost = None
        for handle in self._copies:
            handle.remove()
        self._copies = []

    def unchecked_note(self) -> str | None:
        """Whether bk or ghost clipping never met a batch of two or more samples, whose row
        layout the check then never saw (None: it did, or it was not used)."""
        if self.method not in ("bk", "ghost") or not self.checked_sizes:
            return None
        if max(self.checked_sizes) >= 2:
            return None
        name = "book-keeping" if self.method == "bk" else "ghost"
        return (
            f"{name} clipping was checked on batches of one sample only (every batch held one, "
            "where it is exact; whether the model keeps each sample's rows together in a larger "
            "batch was never checked)"
        )

    def note(self) -> str | None:
        """What a reader of the run should know about the clipping method (None: nothing): why
        bk or ghost clipping fell back to vmap (`fallback`), and `unchecked_note`."""
        notes = [n for n in (self.fallback, self.unchecked_note()) if n is not None]
        return "; ".join(notes) or None

    def _sample_loss(
        self, trainable: dict[str, Tensor], buffers: dict[str, Tensor], x: Tensor, y: Tensor
    ) -> Tensor:
        return self.objective.functional(
            self.model,
            self.split,
            trainable,
            buffers,
            x.unsqueeze(0),
            y.unsqueeze(0),
            autocast=self.autocast,
            private=True,
        )

    def divisor(self, n_local: int) -> int:
        """B: the batch size (the whole local set when batch_size is 0 or exceeds it)."""
        if self.batch_size == 0 or self.batch_size >= n_local:
            return n_local
        return self.batch_size

    def noise_std(self, n_local: int) -> float:
        """Std of the noise in each coordinate of g_tilde: sigma * C / B."""
        return self.noise_multiplier * self.clip / self.divisor(n_local)

    def per_sample_grads(self, x: Tensor, y: Tensor) -> list[Tensor]:
        """Unclipped per-sample gradients, one (B, *shape) tensor per parameter (tests, benches)."""
        if self._ghost is None:
            grads = self._per_sample(*self._tensors(), x, y)
            return [grads[n] for n in self.names]
        # torch.func cannot trace through Opacus' backward hooks: detach them meanwhile.
        self._ghost.remove_hooks()
        try:
            grads = self._per_sample(*self._tensors(), x, y)
        finally:
            self._ghost.add_hooks(loss_reduction="sum", batch_first=True)
            self._ghost.disable_hooks()
        return [grads[n] for n in self.names]

    def _tensors(self) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """vmap's arguments: the trainable parameters (detached) and the state buffers."""
        trainable = {n: p.detach() for n, p in zip(self.names, self.params, strict=True)}
        buffers = dict(zip(self.split.buffer_names, self.split.buffers(self.model), strict=True))
        return trainable, buffers

    def clipped_sum(self, x: Tensor, y: Tensor) -> list[Tensor]:
        """sum_j clip(g_j), never a Python loop over samples."""
        if (
            self.method in ("bk", "ghost")
            and x.shape[0] > 0
            and x.shape[0] not in self.checked_sizes
        ):
            self._verify_exact(x, y)
        if self._bk is not None:
            return self._bk_clipped_sum(x, y)
        if self._ghost is not None:
            return self._ghost_clipped_sum(x, y)
        return self._vmap_clipped_sum(x, y)

    def ghost_mismatch(self, x: Tensor, y: Tensor) -> str | None:
        """Why ghost clipping is not exact for this model on this batch, or None when it is:
        per-sample norms of another length than the batch (a layer that reshapes it), or ghost
        norms of the `checked_samples` that differ from their own backward passes' norms."""
        assert self._ghost is not None
        b = x.shape[0]
        picked = checked_samples(b)
        with self._exact_conditions():
            per_layer = self._ghost_norms(x, y)[1]  # no autocast here
            for name, norms in zip(self.names, per_layer, strict=True):
                if norms.shape != (b,):
                    return (
                        f"layer {name.rsplit('.', 1)[0]} sees {norms.shape[0]} rows for a batch of "
                        f"{b} (it reshapes the batch)"
                    )
            ghost = torch.stack(per_layer).norm(2, dim=0)[picked]
            exact = _norms(self._looped_grads(x[picked], y[picked])).to(ghost.dtype)
        return _norm_mismatch(ghost, exact, picked)

    def bk_mismatch(self, x: Tensor, y: Tensor) -> str | None:
        """Why book-keeping clipping is not exact for this model on this batch, or None when it
        is: a trainable layer that runs twice in a forward pass or on other rows than the
        batch's, per-sample norms of the `checked_samples` that differ from the exact ones, or
        their per-sample gradients (BK's weighted sum with weights e_j) that differ from sample
        j's own gradient (one backward pass per sample). The whole batch goes through BK, so
        that the rows of its layers are laid out as in the step."""
        assert self._bk is not None
        b = x.shape[0]
        picked = checked_samples(b)
        with self._exact_conditions():
            per_layer = self._bk_pass(x, y)
            if isinstance(per_layer, str):
                return per_layer
            exact = self._looped_grads(x[picked], y[picked])
        norms = self._bk.norms(per_layer, b, exact[0][0])[picked]
        exact_norms = _norms(exact).to(norms.dtype)
        why = _norm_mismatch(norms, exact_norms, picked)
        if why is not None:
            return why
        for i, j in enumerate(picked):
            one_hot = torch.zeros(b, device=norms.device, dtype=norms.dtype)
            one_hot[j] = 1
            got = torch.cat([g.flatten() for g in self._bk.weighted_sums(per_layer, one_hot)])
            want = torch.cat([g.flatten() for g in exact[i]]).to(got.dtype)
            error = float(torch.linalg.vector_norm(got - want))
            if error > VERIFY_RTOL * float(torch.linalg.vector_norm(want)) + 1e-6 * float(
                exact_norms.max()
            ):
                return (
                    f"its per-sample gradient of sample {j} of {b} differs from the exact one "
                    f"(by {error:.3g} in norm, against a norm of {float(exact_norms[i]):.3g})"
                )
        return None

    @contextlib.contextmanager
    def _exact_conditions(self) -> Iterator[None]:
        """No dropout, so that the method checked and the reference see the same function: the
        modules without trainable parameters of their own (dropout, drop-path, attention) go to
        eval mode; the layers with parameters stay in train mode, where the hooks record their
        activations. And the same precision: no autocast."""
        stateless = [
            m
            for m in self.model.modules()
            if m.training and next(m.parameters(recurse=False), None) is None
        ]
        autocast = self.autocast
        for m in stateless:
            m.training = False
        self.autocast = None
        try:
            yield
        finally:
            for m in stateless:
                m.training = True
            self.autocast = autocast

    def _looped_grads(self, x: Tensor, y: Tensor) -> list[list[Tensor]]:
        """Per-sample gradients by one backward pass per sample: the reference of the checks,
        exact for any model (no vmap, which cannot trace every model, e.g. RoBERTa's attention
        mask), and cheap for the few samples checked."""
        grads = []
        with _quiet_hooks():  # disabled Opacus hooks still warn when they fire
            for j in range(x.shape[0]):
                out = self.model(x[j : j + 1])  # hooks (Opacus' or BK's) are inactive here
                loss = self.objective.private_loss(out, y[j : j + 1])
                grads.append(list(torch.autograd.grad(loss, self.params, materialize_grads=True)))
        return grads

    def _verify_exact(self, x: Tensor, y: Tensor) -> None:
        """Keep bk or ghost clipping only where `bk_mismatch` / `ghost_mismatch` finds it exact
        on this batch (module docstring); else vmap, or an error where the method was asked
        for. The batch size is checked once."""
        b = x.shape[0]
        name = "book-keeping" if self._bk is not None else "ghost"
        verdict = "is not exact for"
        try:
            why = self.bk_mismatch(x, y) if self._bk is not None else self.ghost_mismatch(x, y)
        except RuntimeError as exc:
            if self._ghost is None or not is_in_place_error(exc):
                raise
            why, verdict = IN_PLACE_WHY, "cannot run"
        if why is None:
            self.checked_sizes.add(b)
            return
        self._give_up(f"{name} clipping {verdict} this model", f"at a batch of {b}: {why}")

    def _give_up(self, what: str, why: str) -> None:
        """`what` (bk or ghost clipping cannot be used) because of `why`: an error where the
        method was asked for, else vmap from now on with a note in `fallback`."""
        if self._strict:
            raise FedbenchError(f"{what}: {why}; use vmap (privacy.clipping vmap) or auto")
        self.close()
        self.method = "vmap"
        self._fall_back(f"{what} ({why}); using vmap")

    def _fall_back(self, note: str) -> None:
        """Add `note` to `fallback`."""
        self.fallback = note if self.fallback is None else f"{self.fallback}; {note}"

    def _bk_pass(self, x: Tensor, y: Tensor) -> list[_PerSample] | str:
        """BK's one forward and one backward pass: each layer's per-sample norms and sums, or
        why the recorded forward does not fit BK (`BookKeeper.problem`)."""
        assert self._bk is not None
        with self._bk.recording(), autocast_context(x.device.type, self.autocast):
            out = self.model(x)
        why = self._bk.problem(x.shape[0])
        if why is not None:
            self._bk.clear()
            return why
        losses = self.objective.private_loss(out, y, "none")
        return self._bk.backward(losses.sum(), x.shape[0])

    def _bk_clipped_sum(self, x: Tensor, y: Tensor) -> list[Tensor]:
        """Each layer's per-sample norms, then its clipped sum sum_j c_j g_j formed from its
        recorded input and output gradient (book_keeping)."""
        assert self._bk is not None
        if x.shape[0] == 0:
            return [torch.zeros_like(p) for p in self.params]
        per_layer = self._bk_pass(x, y)
        if isinstance(per_layer, str):
            raise FedbenchError(f"book-keeping clipping is not exact for this batch: {per_layer}")
        norms = self._bk.norms(per_layer, x.shape[0], self.params[0])
        return self._bk.weighted_sums(per_layer, clip_factors(norms, self.clip))

    def _ghost_norms(self, x: Tensor, y: Tensor) -> tuple[Tensor, list[Tensor]]:
        """The per-sample losses (graph kept) and each parameter's per-sample gradient norms
        from Opacus' hooks, by one backward pass whose parameter gradients are dropped."""
        assert self._ghost is not None
        # The hooks stay attached (re-attaching them costs as much as a small model's step)
        # but act only here. They also fire on the first layer, whose input needs no gradient.
        with _quiet_hooks():
            self._ghost.enable_hooks()
            try:
                with autocast_context(x.device.type, self.autocast):
                    out = self._ghost(x)
                losses = self.objective.private_loss(out, y, "none")
                torch.autograd.grad(losses.sum(), self.params, retain_graph=True)
                # opacus's hooks set _norm_sample on each parameter (untyped: not in torch's stub)
                return losses, [p._norm_sample for p in self.params]  # type: ignore[attr-defined]
            finally:
                self._ghost.disable_hooks()

    def _ghost_clipped_sum(self, x: Tensor, y: Tensor) -> list[Tensor]:
        """Two backward passes: per-sample norms from Opacus' hooks, then the reweighted loss.
        An in-place operation that only training mode runs (the check runs without dropout)
        ends ghost clipping here as it would at the check."""
        try:
            losses, per_layer = self._ghost_norms(x, y)
        except RuntimeError as exc:
            if not is_in_place_error(exc):
                raise
            self._give_up("ghost clipping cannot run this model", IN_PLACE_WHY)
            return self._vmap_clipped_sum(x, y)
        norms = torch.stack(per_layer).norm(2, dim=0)
        factors = clip_factors(norms.detach(), self.clip).to(losses.dtype)
        with _quiet_hooks():  # the disabled hooks still warn when they fire
            return list(torch.autograd.grad((losses * factors).sum(), self.params))

    def _per_sample_checked(
        self, trainable: dict[str, Tensor], buffers: dict[str, Tensor], x: Tensor, y: Tensor
    ) -> dict[str, Tensor]:
        """vmap's per-sample gradients; under bf16 autocast, a model whose backward has no
        batching rule for mixed dtypes (Swin's window attention: "expected scalar type BFloat16
        but found Float") is computed in float32 from then on, with a note in `fallback`."""
        try:
            return self._per_sample(trainable, buffers, x, y)
        except RuntimeError as exc:
            if str(exc).startswith("vmap:"):  # e.g. data-dependent control flow (RoBERTa's mask)
                raise FedbenchError(
                    f"vmap cannot trace this model ({str(exc).splitlines()[0][:160]}); use "
                    "privacy.clipping auto, bk or ghost"
                ) from None
            if self.autocast is None or "expected scalar type" not in str(exc):
                raise
        self.autocast = None
        self._fall_back(
            "per-sample gradients under bf16 autocast fail for this model in vmap; float32"
        )
        return self._per_sample(trainable, buffers, x, y)

    def _vmap_clipped_sum(self, x: Tensor, y: Tensor) -> list[Tensor]:
        """Chunked over the batch: per-sample gradients of a chunk, clipped and summed."""
        trainable, buffers = self._tensors()
        total = [torch.zeros_like(p) for p in self.params]
        step = chunk_size(self.d, max(1, x.shape[0]))
        for start in range(0, x.shape[0], step):
            grads = self._per_sample_checked(
                trainable, buffers, x[start : start + step], y[start : start + step]
            )
            flat = [grads[n].flatten(1) for n in self.names]
            norms = torch.linalg.vector_norm(torch.cat(flat, dim=1), dim=1)
            factors = clip_factors(norms, self.clip)
            for acc, g in zip(total, (grads[n] for n in self.names), strict=True):
                acc.add_(torch.tensordot(factors.to(g.dtype), g, dims=1))
        return total

    def __call__(
        self, x: Tensor, y: Tensor, *, n_local: int, generator: torch.Generator
    ) -> list[Tensor]:
        """g_tilde = (sum_j clip(g_j) + N(0, sigma^2 C^2 I)) / B."""
        total = self.clipped_sum(x, y)
        std = self.noise_multiplier * self.clip
        if std > 0:
            for acc in total:
                noise = torch.randn(
                    acc.shape, generator=generator, device=acc.device, dtype=acc.dtype
                )
                acc.add_(noise, alpha=std)
        torch._foreach_div_(total, float(self.divisor(n_local)))
        return total


def noise_generator(device: torch.device, client_key: int) -> torch.Generator:
    """The noise stream of one client in one round (derived from the (seed, round, client) key)."""
    return torch.Generator(device=device).manual_seed(client_key ^ NOISE_STREAM)


class PoissonBatches:
    """K batches, each sample included independently with probability q (exact Poisson
    subsampling, `privacy.sampling: poisson`); batch sizes vary, possibly empty. `batches[k]` is
    drawn when asked (read in increasing k), so memory does not grow with K.

    Row k of the inclusion draws is the k-th row of one up-front `torch.rand(K, n)` from
    `generator`: it comes from a copy of the generator's state. With `advance` the generator
    itself is moved past all K rows (in chunks), as the up-front draw would leave it.
    """

    def __init__(
        self,
        samples: Tensor,
        local_steps: int,
        rate: float,
        generator: torch.Generator,
        advance: bool = True,
    ) -> None:
        self.samples, self.local_steps, self.rate = samples, local_steps, rate
        self._draw = torch.Generator()
        self._draw.set_state(generator.get_state())
        self._next = 0
        n = samples.numel()
        chunk = max(1, _ADVANCE_FLOATS // max(n, 1))
        for start in range(0, local_steps if advance else 0, chunk):
            torch.rand(min(chunk, local_steps - start), n, generator=generator)

    def __len__(self) -> int:
        return self.local_steps

    def __getitem__(self, k: int) -> Tensor:
        if not self._next <= k < self.local_steps:
            raise IndexError(f"local step {k} of {self.local_steps} (read in order)")
        while self._next <= k:
            mask = torch.rand(1, self.samples.numel(), generator=self._draw)[0] < self.rate
            self._next += 1
        return self.samples[mask.to(self.samples.device)]


#: Floats drawn at a time when a generator is moved past a PoissonBatches' draws.
_ADVANCE_FLOATS = 1 << 20


def poisson_batches(
    samples: Tensor,
    local_steps: int,
    rate: float,
    generator: torch.Generator,
    advance: bool = True,
) -> PoissonBatches:
    """The K Poisson-subsampled batches of a client (see PoissonBatches)."""
    return PoissonBatches(samples, local_steps, rate, generator, advance)
