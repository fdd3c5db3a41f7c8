"""Sample-level DP gradients (docs/algorithms.md, "Differential privacy"; DP-FedAdamW paper, Eq. 3).

Each local step:
    g_j      = grad of the loss of sample j           (per-sample, torch.func vmap(grad))
    g_j     <- g_j / max(1, ||g_j||_2 / C)            (norm over all trainable parameters)
    g_tilde  = (sum_j g_j + N(0, sigma^2 C^2 I)) / B

B is the configured batch size (the expected one under Poisson sampling, as Opacus divides by
it). The noise comes from a generator seeded by (seed, round, client), so a rerun or a resumed
run draws the same noise.

sum_j clip(g_j) is computed one of two ways, both exact:
- `ghost` (used whenever Opacus has a per-layer rule for every layer with trainable weights:
  Linear, Conv, GroupNorm, LayerNorm, Embedding, ...): Opacus' fast gradient clipping (ghost
  clipping, Li et al. 2022; Bu et al. 2023) gets the per-sample norms ||g_j|| from each layer's
  activations and output gradients during one backward pass, without materialising the B
  per-sample gradients of the whole model (Linear layers never materialise theirs, Conv2d
  layers only where that is cheaper than their ghost norm: `conv_norms`); a second
  backward pass of sum_j c_j * loss_j with c_j = 1 / max(1, ||g_j|| / C) then gives the clipped
  sum directly. Cost: one forward and two backward passes, plus the norms.
- `vmap` (any other model): per-sample gradients with torch.func vmap(grad), in chunks so that
  at most about `PER_SAMPLE_BYTES` of them are alive at once; clipping and summing per chunk.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Literal

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from fedbench.errors import FedbenchError

#: Memory for one chunk of per-sample gradients (float32: 4 bytes x d x chunk).
PER_SAMPLE_BYTES = 256 * 2**20
#: Offset mixed into the client key so that noise and batch draws are independent streams.
NOISE_STREAM = 0x5DEECE66D


def check_no_batchnorm(model: nn.Module, model_name: str) -> None:
    """Per-sample clipping is undefined with BatchNorm (a sample's gradient depends on the batch)."""
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            raise FedbenchError(
                f"model {model_name} has BatchNorm layers, which sample-level DP cannot train "
                "(per-sample gradients mix the batch); use model.norm gn"
            )


def chunk_size(d: int, batch: int, budget_bytes: int = PER_SAMPLE_BYTES) -> int:
    """Samples per vmap chunk: all of them when d x B floats fit in the budget."""
    return max(1, min(batch, budget_bytes // max(1, 4 * d)))


def clip_factors(norms: Tensor, clip: float) -> Tensor:
    """1 / max(1, ||g_j|| / C) for each sample j."""
    return torch.clamp(clip / (norms + 1e-12), max=1.0)


def _full_precision(logits: Tensor) -> Tensor:
    """Logits for the loss: float32 when autocast produced half precision, else as they are."""
    return logits.float() if logits.dtype in (torch.bfloat16, torch.float16) else logits


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

    `method` auto = ghost clipping where `ghost_supported`, else vmap.
    """

    def __init__(
        self,
        model: nn.Module,
        params: list[nn.Parameter],
        *,
        noise_multiplier: float,
        clip: float,
        batch_size: int,
        autocast: torch.dtype | None = None,
        method: Literal["auto", "ghost", "vmap"] = "auto",
    ) -> None:
        by_id = {id(p): name for name, p in model.named_parameters()}
        self.names = [by_id[id(p)] for p in params]
        self.model = model
        self.params = params
        self.noise_multiplier = noise_multiplier
        self.clip = clip
        self.batch_size = batch_size
        self.autocast = autocast
        self.d = sum(p.numel() for p in params)
        self._per_sample = vmap(
            grad(self._sample_loss), in_dims=(None, None, 0, 0), randomness="different"
        )
        if method == "auto":
            method = "ghost" if ghost_supported(model) else "vmap"
        self.method = method
        self._ghost = None
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

    def _sample_loss(
        self, trainable: dict[str, Tensor], frozen: dict[str, Tensor], x: Tensor, y: Tensor
    ) -> Tensor:
        if self.autocast is None:
            out = functional_call(self.model, {**frozen, **trainable}, (x.unsqueeze(0),))
        else:
            with torch.autocast(x.device.type, dtype=self.autocast):
                out = functional_call(self.model, {**frozen, **trainable}, (x.unsqueeze(0),))
        return nn.functional.cross_entropy(_full_precision(out), y.unsqueeze(0))

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
        trainable = {n: p.detach() for n, p in zip(self.names, self.params, strict=True)}
        frozen = self._frozen(trainable)
        if self._ghost is None:
            grads = self._per_sample(trainable, frozen, x, y)
            return [grads[n] for n in self.names]
        # torch.func cannot trace through Opacus' backward hooks: detach them meanwhile.
        self._ghost.remove_hooks()
        try:
            grads = self._per_sample(trainable, frozen, x, y)
        finally:
            self._ghost.add_hooks(loss_reduction="sum", batch_first=True)
            self._ghost.disable_hooks()
        return [grads[n] for n in self.names]

    def _frozen(self, trainable: dict[str, Tensor]) -> dict[str, Tensor]:
        frozen = {n: p.detach() for n, p in self.model.named_parameters() if n not in trainable}
        frozen.update(dict(self.model.named_buffers()))
        return frozen

    def clipped_sum(self, x: Tensor, y: Tensor) -> list[Tensor]:
        """sum_j clip(g_j), never a Python loop over samples."""
        if self._ghost is not None:
            return self._ghost_clipped_sum(x, y)
        return self._vmap_clipped_sum(x, y)

    def _ghost_clipped_sum(self, x: Tensor, y: Tensor) -> list[Tensor]:
        """Two backward passes: per-sample norms from Opacus' hooks, then the reweighted loss."""
        assert self._ghost is not None
        cast = (
            torch.autocast(x.device.type, dtype=self.autocast)
            if self.autocast is not None
            else contextlib.nullcontext()
        )
        # The hooks stay attached (re-attaching them costs as much as a small model's step)
        # but act only here. They also fire on the first layer, whose input needs no gradient.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Full backward hook is firing", UserWarning)
            self._ghost.enable_hooks()
            try:
                with cast:
                    out = self._ghost(x)
                losses = nn.functional.cross_entropy(_full_precision(out), y, reduction="none")
                # The first pass is for the hooks (norms); its parameter gradients are dropped.
                torch.autograd.grad(losses.sum(), self.params, retain_graph=True)
                norms = torch.stack([p._norm_sample for p in self.params]).norm(2, dim=0)
            finally:
                self._ghost.disable_hooks()
            factors = clip_factors(norms.detach(), self.clip).to(losses.dtype)
            return list(torch.autograd.grad((losses * factors).sum(), self.params))

    def _vmap_clipped_sum(self, x: Tensor, y: Tensor) -> list[Tensor]:
        """Chunked over the batch: per-sample gradients of a chunk, clipped and summed."""
        trainable = {n: p.detach() for n, p in zip(self.names, self.params, strict=True)}
        frozen = self._frozen(trainable)
        total = [torch.zeros_like(p) for p in self.params]
        step = chunk_size(self.d, max(1, x.shape[0]))
        for start in range(0, x.shape[0], step):
            grads = self._per_sample(
                trainable, frozen, x[start : start + step], y[start : start + step]
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


GradientFn = Callable[[Tensor, Tensor], list[Tensor]]
