"""The vectorised engine (`runtime.engine: vectorized`): the S sampled clients of a round train
together, as one batched computation over a leading client dimension.

- Parameters and the algorithm's local state are stacked: every tensor gets a leading dim of S.
  The local rules are elementwise torch._foreach_* functions, so `local_step` runs unchanged
  on the stacked lists (scalars such as lr and bias corrections are the same for every client).
- Gradients come from torch.func: vmap(grad(loss)) over functional_call of the one model, so the
  clients' forward/backward passes are batched (grouped convolutions, batched matmuls).
- `client_begin` / `client_end` run per client once per round on unstacked views, so block
  means/expansions (FedAdamW) and per-client stores (SCAFFOLD's c_i) need no client dim; the
  aggregation is a weighted reduction over the client dimension.
- Batches are exactly the sequential engine's: the order of client i is drawn from the generator
  seeded by (seed, round, client), and augmentation consumes that same generator, so both engines
  agree to float rounding (fp32, dropout-free models). Gradient clipping is per client.

Models with BatchNorm (per-client running statistics), DP runs and algorithms whose local rule
is not elementwise (`Algorithm.supports_vectorized` False: DP-FedAvg-LS's FFT, DP-FedSAM's
two-gradient step) run on the sequential engine instead, with a printed note.
"""

from __future__ import annotations

import contextlib

import torch
from rich.console import Console
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from fedbench.algorithms.base import RoundInfo, State
from fedbench.data.sampler import batch_indices, client_seed
from fedbench.engine.aggregation import RoundResults
from fedbench.engine.client_state import index_state, stack_states, to_device
from fedbench.engine.loop import Engine
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.setup import RunSetup


def has_batchnorm(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def vectorized_unsupported(setup: RunSetup) -> str | None:
    """Why this run cannot use the vectorised engine, or None when it can."""
    if setup.cfg.privacy is not None:
        return "DP training (per-sample clipping and noise) is not vectorised yet"
    if has_batchnorm(setup.model):
        return "the model has BatchNorm (per-client running statistics)"
    if not setup.algorithm.supports_vectorized:
        return f"algorithm {setup.cfg.algorithm.name} has a non-elementwise local rule"
    return None


def clip_per_client_(grads: list[Tensor], max_norm: float | None) -> None:
    """Per-client global-norm clipping of stacked gradients (leading dim = client)."""
    if max_norm is None:
        return
    s = grads[0].shape[0]
    norms = torch.stack([torch.linalg.vector_norm(g.reshape(s, -1), dim=1) for g in grads])
    scale = torch.clamp(max_norm / torch.linalg.vector_norm(norms, dim=0), max=1.0)
    for g in grads:
        g.mul_(scale.view(s, *([1] * (g.ndim - 1))))


class VectorizedEngine(Engine):
    """Engine whose rounds train the sampled clients together (see the module docstring)."""

    def __init__(self, setup: RunSetup, folder: RunFolder, console: Console | None) -> None:
        super().__init__(setup, folder, console)
        model = setup.model
        self.names = [n for n, p in model.named_parameters() if p.requires_grad]
        self.constants = {
            **{n: p.detach() for n, p in model.named_parameters() if not p.requires_grad},
            **dict(model.named_buffers()),
        }

        def loss(params: dict[str, Tensor], x: Tensor, y: Tensor, w: Tensor | None) -> Tensor:
            logits = functional_call(model, (params, self.constants), (x,))
            if w is None:
                return nn.functional.cross_entropy(logits, y)
            # Padded batch (clients of unequal sizes with batch_size 0): masked mean.
            per_sample = nn.functional.cross_entropy(logits, y, reduction="none")
            return (per_sample * w).sum() / w.sum()

        self.grad_fn = vmap(grad(loss), in_dims=(0, 0, 0, 0), randomness="different")
        self.grad_fn_unweighted = vmap(
            grad(lambda p, x, y: loss(p, x, y, None)), in_dims=(0, 0, 0), randomness="different"
        )
        if self.cfg.runtime.compile:
            self.grad_fn = torch.compile(self.grad_fn)
            self.grad_fn_unweighted = torch.compile(self.grad_fn_unweighted)

    def _orders(
        self, clients: list[int], info: RoundInfo
    ) -> tuple[Tensor, Tensor | None, list[torch.Generator]]:
        """(S, K, B) batch indices, an optional (S, K, B) sample mask, and the clients' generators."""
        s, cfg = self.setup, self.cfg
        orders, generators = [], []
        for client in clients:
            generator = torch.Generator().manual_seed(client_seed(cfg.seed, info.round, client))
            orders.append(
                batch_indices(s.clients[client], info.local_steps, cfg.fl.batch_size, generator)
            )
            generators.append(generator)
        widest = max(o.shape[1] for o in orders)
        if all(o.shape[1] == widest for o in orders):
            return torch.stack(orders), None, generators
        padded = torch.zeros(len(orders), info.local_steps, widest, dtype=torch.int64)
        padded = padded.to(orders[0].device)
        mask = torch.zeros(padded.shape, device=padded.device)
        for i, o in enumerate(orders):
            padded[i, :, : o.shape[1]] = o
            mask[i, :, : o.shape[1]] = 1.0
        return padded, mask, generators

    def _round(self, r: int, lr: float, diagnostics: bool = False) -> None:
        s, cfg = self.setup, self.cfg
        algorithm = s.algorithm
        clients = s.schedule[r]
        n = len(clients)
        info = RoundInfo(r, lr, cfg.fl.local_steps, s.num_clients, n)
        stored = [self.client_states.get(c) for c in clients]
        stored = [None if st is None else to_device(st, s.device) for st in stored]
        local = stack_states(
            [algorithm.client_begin(self.x, self.server, st, info) for st in stored]
        )
        y = [t.unsqueeze(0).repeat(n, *([1] * t.ndim)) for t in self.x]
        orders, mask, generators = self._orders(clients, info)
        data = s.data
        cast = (
            torch.autocast(s.device.type, dtype=self.autocast)
            if self.autocast is not None
            else contextlib.nullcontext()
        )
        for k in range(1, info.local_steps + 1):
            idx = orders[:, k - 1]
            xb, yb = data.x_train[idx], data.y_train[idx]
            if data.augment is not None:
                xb = torch.stack([data.augment(xb[i], generators[i]) for i in range(n)])
            if s.prepare is not None:
                xb = s.prepare(xb.flatten(0, 1)).unflatten(0, idx.shape)
            params = dict(zip(self.names, y, strict=True))
            with cast:
                if mask is None:
                    grads = self.grad_fn_unweighted(params, xb, yb)
                else:
                    grads = self.grad_fn(params, xb, yb, mask[:, k - 1])
            g = [grads[name] for name in self.names]
            clip_per_client_(g, cfg.algorithm.grad_clip)
            with torch.no_grad():
                algorithm.local_step(y, g, local, k, info)
        self._aggregate(clients, stored, y, local, info, diagnostics)

    def _aggregate(
        self,
        clients: list[int],
        stored: list[State | None],
        y: list[Tensor],
        local: State,
        info: RoundInfo,
        diagnostics: bool,
    ) -> None:
        """The sequential engine's end of round, client by client over the stacked results."""
        results = RoundResults(diagnostics, keep_uploads=self.setup.algorithm.uses_client_uploads)
        for i, client in enumerate(clients):
            params = [t[i] for t in y]
            # No BatchNorm here, so the model's buffers never change: the global ones are added.
            self._end_client(
                results, client, params, index_state(local, i), stored[i], info, self.buffers
            )
        self._finish_round(results, info)
