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
- The S clients train in chunks of `runtime.client_chunk` (auto: as many as fit in half the free
  device memory, `fedbench.engine.memory`), so peak memory grows with the chunk, not with S;
  every chunk's uploads go into the same streaming aggregation.
- Batches are exactly the sequential engine's: the order of client i is drawn from the generator
  seeded by (seed, round, client), and augmentation consumes that same generator, so both engines
  agree to float rounding (fp32, dropout-free models). Gradient clipping is per client.

BatchNorm: under bf16 autocast its inputs are cast to float32 (its batching rule takes one
dtype; `accelerate.batchnorm_in_float32`). Each client's buffers (running statistics, step counter) are stacked like its
parameters and updated in place by its own forward passes (batch statistics per client); at the
end of the round they are averaged as the sequential engine averages them. Clients whose batch
sizes differ train in separate groups then (padding would enter the batch statistics).
DP runs and algorithms whose local rule is not elementwise (`Algorithm.supports_vectorized`
False: DP-FedAvg-LS's FFT, DP-FedSAM's two-gradient step) run on the sequential engine
instead, with a printed note.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace

import torch
from rich.console import Console
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from fedbench.algorithms.base import RoundInfo, Scalar, State
from fedbench.data.sampler import batch_indices, client_seed
from fedbench.engine.accelerate import batchnorm_in_float32
from fedbench.engine.aggregation import RoundResults, local_step_sizes
from fedbench.engine.captured import CompiledOrEager, captured_unsupported, compile_per_owner
from fedbench.engine.client_state import index_state, stack_states, to_device
from fedbench.engine.loop import Engine
from fedbench.engine.memory import auto_client_chunk, client_bytes, free_memory_bytes
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.schedule import round_info
from fedbench.engine.setup import RunSetup


def vectorized_unsupported(setup: RunSetup) -> str | None:
    """Why this run cannot use the vectorised engine, or None when it can."""
    if setup.cfg.privacy is not None and setup.cfg.privacy.level == "sample":
        return "DP training (per-sample clipping and noise) is not vectorised yet"
    if not setup.algorithm.supports_vectorized:
        return f"algorithm {setup.cfg.algorithm.name} has a non-elementwise local rule"
    if setup.cfg.fl.local_steps_min is not None:
        return "fl.local_steps_min gives clients different numbers of local steps"
    if setup.algorithm.uses_full_gradient(setup.cfg.algorithm):
        return "a full local-data gradient pass (mimelite.full_batch_gradient) is sequential"
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

    name = "vectorized"

    def __init__(self, setup: RunSetup, folder: RunFolder, console: Console | None) -> None:
        super().__init__(setup, folder, console)
        model = setup.model
        if self.autocast is not None:
            batchnorm_in_float32(model)  # vmap's BatchNorm rule needs one dtype
        self.names = [n for n, p in model.named_parameters() if p.requires_grad]
        # Buffers in the state_dict (BatchNorm statistics) are stacked per client like the
        # parameters and updated in place by each client's forward; the rest are constants.
        in_state = set(model.state_dict())
        self.buffer_names = [n for n, _ in model.named_buffers() if n in in_state]
        self.constants = {
            **{n: p.detach() for n, p in model.named_parameters() if not p.requires_grad},
            **{n: b for n, b in model.named_buffers() if n not in in_state},
        }

        def loss(
            params: dict[str, Tensor],
            buffers: dict[str, Tensor],
            x: Tensor,
            y: Tensor,
            w: Tensor | None,
        ) -> Tensor:
            logits = functional_call(model, (params, buffers, self.constants), (x,))
            if w is None:
                return nn.functional.cross_entropy(logits, y)
            # Padded batch (clients of unequal sizes with batch_size 0): masked mean.
            per_sample = nn.functional.cross_entropy(logits, y, reduction="none")
            return (per_sample * w).sum() / w.sum()

        self.grad_fn = vmap(grad(loss), in_dims=(0, 0, 0, 0, 0), randomness="different")
        self.grad_fn_unweighted = vmap(
            grad(lambda p, b, x, y: loss(p, b, x, y, None)),
            in_dims=(0, 0, 0, 0),
            randomness="different",
        )
        self._per_client_bytes: int | None = None
        #: The stacked step (gradients, per-client clipping, the local rule), compiled as one
        #: graph with `runtime.compile` where the local rule is capturable; else the eager step
        #: (with the vmapped gradient compiled alone under `runtime.compile`).
        self.step: Callable[..., None] = self._stacked_step
        self.tensor_scalars = False
        if self.cfg.runtime.compile:
            if captured_unsupported(setup.algorithm, private=False) is None:
                # Static shapes: vmap's BatchNorm rule takes no symbolic sizes; the shapes of a
                # run are few (clients train in groups of one batch width, chunks of one size).
                self.step = CompiledOrEager(
                    compile_per_owner(self._stacked_step, dynamic=False),
                    self._stacked_step,
                    self._compile_gradient_only,
                )
                self.tensor_scalars = True
                self.compiled = "step"
            else:
                self._compile_gradient_only()

    def _compile_gradient_only(self, why: str | None = None) -> None:
        """Compile the vmapped gradient alone; the stacked step around it runs eagerly (where
        the rule is not capturable, or after compiling the whole step failed: `why`)."""
        self.grad_fn = torch.compile(self.grad_fn)
        self.grad_fn_unweighted = torch.compile(self.grad_fn_unweighted)
        self.compiled = "gradient"
        if why is not None:
            self.compile_fallback = why

    def _stacked_step(
        self,
        y: list[Tensor],
        buffers: dict[str, Tensor],
        local: State,
        xb: Tensor,
        yb: Tensor,
        mask: Tensor | None,
        k: Scalar,
        info: RoundInfo,
    ) -> None:
        """Local step k of the stacked clients: their gradients (vmap over the client dim),
        clipped per client, then the algorithm's elementwise rule on the stacked tensors."""
        cast = (
            torch.autocast(self.setup.device.type, dtype=self.autocast)
            if self.autocast is not None
            else contextlib.nullcontext()
        )
        params = dict(zip(self.names, y, strict=True))
        with cast:
            if mask is None:
                grads = self.grad_fn_unweighted(params, buffers, xb, yb)
            else:
                grads = self.grad_fn(params, buffers, xb, yb, mask)
        g = [grads[name] for name in self.names]
        clip_per_client_(g, self.cfg.algorithm.grad_clip)
        with torch.no_grad():
            self.setup.algorithm.local_step(y, g, local, k, info)  # type: ignore[arg-type]

    def _scalar(self, value: float) -> Tensor:
        return torch.full((), value, dtype=torch.float64, device=self.setup.device)

    def _captured_step(self, private: bool) -> None:
        """The sequential engine's compiled step does not apply: clients train stacked."""
        return None

    def _orders(
        self, clients: list[int], info: RoundInfo
    ) -> tuple[Callable[[int], Tensor], Tensor | None, list[torch.Generator]]:
        """The clients' batches as a function of the local step k (0-based) giving (S, B) batch
        indices, drawn one local epoch at a time; an optional (S, B) sample mask (clients of
        unequal widths, padded); and the clients' generators."""
        s, cfg = self.setup, self.cfg
        orders, generators = [], []
        for client in clients:
            generator = torch.Generator().manual_seed(client_seed(cfg.seed, info.round, client))
            orders.append(
                batch_indices(
                    s.clients[client],
                    info.local_steps,
                    cfg.fl.batch_size,
                    generator,
                    advance=s.data.augment is not None,  # it augments the batches next
                )
            )
            generators.append(generator)
        widths = [o.shape[1] for o in orders]
        widest = max(widths)
        if all(w == widest for w in widths):
            return (lambda k: torch.stack([o[k] for o in orders])), None, generators
        device = s.clients[clients[0]].device
        mask = torch.zeros(len(orders), widest, device=device)
        for i, w in enumerate(widths):
            mask[i, :w] = 1.0

        def padded(k: int) -> Tensor:
            rows = torch.zeros(len(orders), widest, dtype=torch.int64, device=device)
            for i, o in enumerate(orders):
                rows[i, : widths[i]] = o[k]
            return rows

        return padded, mask, generators

    def client_chunk(self, clients: int) -> int:
        """Clients trained together (`runtime.client_chunk`; auto: from free device memory)."""
        chunk = self.cfg.runtime.client_chunk
        if chunk != "auto":
            return min(int(chunk), clients)
        if self._per_client_bytes is None:
            s = self.setup
            sample = s.data.x_train[:1]
            if s.prepare is not None:
                sample = s.prepare(sample)
            self._per_client_bytes = client_bytes(
                s.model, sample[0], max(1, self.cfg.fl.batch_size)
            )
        return auto_client_chunk(
            self._per_client_bytes, free_memory_bytes(self.setup.device), clients
        )

    def _round(self, r: int, lr: float, diagnostics: bool = False) -> None:
        clients = self.setup.schedule[r]
        if not clients:  # every sampled client dropped out: no update this round
            return
        info = round_info(
            self.cfg.algorithm, r, lr, self.cfg.fl.local_steps, self.setup.num_clients, len(clients)
        )
        results = self._new_results(r, diagnostics)
        chunk = self.client_chunk(len(clients))
        for group in self._groups(clients):
            for start in range(0, len(group), chunk):
                self._train_chunk(group[start : start + chunk], info, results)
        self._finish_round(results, info)

    def _groups(self, clients: list[int]) -> list[list[int]]:
        """The clients in groups trained apart: with BatchNorm, one group per batch width, as
        padded samples would enter the batch statistics; otherwise one group (padded)."""
        if not self.buffer_names:
            return [clients]
        batch = self.cfg.fl.batch_size
        groups: dict[int, list[int]] = {}
        for client in clients:
            size = self.setup.client_sizes[client]
            groups.setdefault(size if batch == 0 or batch >= size else batch, []).append(client)
        return list(groups.values())

    def _train_chunk(self, clients: list[int], info: RoundInfo, results: RoundResults) -> None:
        """Train `clients` together for K steps and add their uploads to the round's results."""
        s = self.setup
        algorithm = s.algorithm
        n = len(clients)
        stored = [self.client_states.get(c) for c in clients]
        stored = [None if st is None else to_device(st, s.device) for st in stored]
        local = stack_states(
            [algorithm.client_begin(self.x, self.server, st, info) for st in stored]
        )
        y = [t.unsqueeze(0).repeat(n, *([1] * t.ndim)) for t in self.x]
        buffers = {
            name: g.unsqueeze(0).repeat(n, *([1] * g.ndim))
            for name, g in zip(self.buffer_names, self.global_buffers, strict=True)
        }
        orders, mask, generators = self._orders(clients, info)
        s.model.train()
        data = s.data
        step_sizes = torch.zeros(n, dtype=torch.float64, device=s.device)
        for k in range(1, info.local_steps + 1):
            idx = orders(k - 1)
            xb, yb = data.x_train[idx], data.y_train[idx]
            if data.augment is not None:
                xb = torch.stack([data.augment(xb[i], generators[i]) for i in range(n)])
            if s.prepare is not None:
                xb = s.prepare(xb.flatten(0, 1)).unflatten(0, idx.shape)
            before = [t.clone() for t in y] if results.diagnostics else None
            step_info = info.at_step(k)
            if self.tensor_scalars:  # 0-d device tensors: the compiled graph freezes no value
                scalar = self._scalar
                step_info = replace(step_info, lr=scalar(step_info.lr), round=scalar(info.round))
                self.step(y, buffers, local, xb, yb, mask, scalar(k), step_info)
            else:
                self.step(y, buffers, local, xb, yb, mask, k, step_info)
            if before is not None:
                step_sizes = step_sizes + local_step_sizes(before, y, n)
        ratios = (step_sizes / info.local_steps / info.lr).tolist() if results.diagnostics else None
        for i, client in enumerate(clients):
            params = [t[i] for t in y]
            client_buffers = [buffers[name][i] for name in self.buffer_names]
            self._end_client(
                results,
                client,
                params,
                index_state(local, i),
                stored[i],
                info,
                client_buffers,
                ratios[i] if ratios is not None else None,
            )
