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
Every step goes through the rule's `local_step_with_oracle` with a gradient oracle over the
stacked rows (fedbench.engine.stacked.stacked_step), so rules that take several gradients per
step (FedSAM, FAFED) stack, reducing per client through the oracle's `norm`, and MOON's
representation term is part of the oracle's objective; Mime's full-batch gradient is taken
before the steps over the clients' batches of one width at a time. DP runs and algorithms
whose local rule is not elementwise (`Algorithm.supports_vectorized` False: DP-FedAvg-LS's FFT)
run on the sequential engine instead: a fallback of the execution plan, with a printed note.

On CUDA (`runtime.cuda_graphs` auto or on, not private, not compiled, a capturable rule) the
whole stacked step is replayed as a CUDA graph on static buffers (fedbench.engine.graphed).

The round is the round protocol's (fedbench.engine.protocol.run_rounds); its `train` step is
the row trainer of fedbench.engine.stacked, whose rows each start from their own run's global
model, so that the seeds of a table cell can train in one stacked computation
(`runtime.seeds_together`, fedbench.engine.seeds) by the same code.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from rich.console import Console
from torch import Tensor
from torch.func import grad, vmap

from fedbench.algorithms.base import RoundInfo, Scalar, State
from fedbench.algorithms.representation import uses_representation
from fedbench.engine.accelerate import batchnorm_in_float32
from fedbench.engine.captured import CompiledOrEager, compile_per_owner, step_scalars
from fedbench.engine.graphed import StepGraphs, cuda_step_graphs
from fedbench.engine.loop import Engine
from fedbench.engine.memory import auto_client_chunk, client_bytes, free_memory_bytes
from fedbench.engine.plan import ExecutionPlan, vectorized_unsupported
from fedbench.engine.protocol import FederationRound
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.schedule import round_info
from fedbench.engine.setup import RunSetup
from fedbench.engine.stacked import Representation, stacked_rounds, stacked_step, width_groups
from fedbench.models.representation import represent_and_classify, represent_with
from fedbench.step import split_model

__all__ = ["VectorizedEngine", "vectorized_unsupported"]


class VectorizedEngine(Engine):
    """Engine whose rounds train the sampled clients together (see the module docstring)."""

    name = "vectorized"
    stacks_rows = True

    def __init__(
        self, plan: ExecutionPlan, setup: RunSetup, folder: RunFolder, console: Console | None
    ) -> None:
        super().__init__(plan, setup, folder, console)
        model = setup.model
        if self.autocast is not None:
            batchnorm_in_float32(model)  # vmap's BatchNorm rule needs one dtype
        # Buffers in the state_dict (BatchNorm statistics) are stacked per client like the
        # parameters and updated in place by each client's forward; the rest are constants.
        self.split = split_model(model)
        self.names = self.split.names
        self.buffer_names = self.split.buffer_names
        objective, split = self.objective, self.split

        def loss(
            params: dict[str, Tensor],
            buffers: dict[str, Tensor],
            x: Tensor,
            y: Tensor,
            w: Tensor | None,
        ) -> Tensor:
            # w: a padded batch's mask (clients of unequal sizes with batch_size 0).
            return objective.functional(model, split, params, buffers, x, y, w)

        self.grad_fn = vmap(grad(loss), in_dims=(0, 0, 0, 0, 0), randomness="different")
        self.grad_fn_unweighted = vmap(
            grad(lambda p, b, x, y: loss(p, b, x, y, None)),
            in_dims=(0, 0, 0, 0),
            randomness="different",
        )
        self._per_client_bytes: int | None = None
        #: The first auto chunk, kept for the run's step graphs (`client_chunk`).
        self._graphed_chunk: int | None = None
        #: MOON's representation objective (fedbench.engine.stacked.representation_gradients).
        self.representation: Representation | None = None
        if uses_representation(setup.algorithm):
            self.representation = Representation(
                represent_and_classify(model), represent_with(model, self.names)
            )
        #: The stacked step (gradients, per-client clipping, the local rule), compiled as one
        #: graph where the plan says `compile: step`; else the eager step (with the vmapped
        #: gradient compiled alone for `compile: gradient`).
        self.stacked_step: Callable[..., None] = self._stacked_step
        self.tensor_scalars = False
        #: The stacked step replayed as a CUDA graph (the plan's `cuda_graphs: on`,
        #: fedbench.engine.graphed); None: eager steps.
        self.step_graphs: StepGraphs | None = None
        if plan.cuda_graphs:
            self.step_graphs = cuda_step_graphs(strict="cuda_graphs" in plan.required)
        if plan.compile == "step":
            # Static shapes: vmap's BatchNorm rule takes no symbolic sizes; the shapes of a
            # run are few (clients train in groups of one batch width, chunks of one size).
            self.stacked_step = CompiledOrEager(
                compile_per_owner(self._stacked_step, dynamic=False),
                self._stacked_step,
                self._compile_gradient_only,
            )
            self.tensor_scalars = True
        elif plan.compile == "gradient":
            self._compile_gradient_only()

    def _compile_gradient_only(self, why: str | None = None) -> None:
        """Compile the vmapped gradient alone; the stacked step around it runs eagerly (where
        the rule is not capturable, or after compiling the whole step failed: `why`)."""
        self.grad_fn = torch.compile(self.grad_fn)
        self.grad_fn_unweighted = torch.compile(self.grad_fn_unweighted)
        self.compiled = "gradient"

    def _compile_fallback(self) -> str | None:
        """Why the compiled step, or the step graphs (`cuda_graphs` auto), fell back to eager."""
        if self.step_graphs is not None and self.step_graphs.fallback is not None:
            return self.step_graphs.fallback
        step = self.stacked_step
        return step.fallback if isinstance(step, CompiledOrEager) else None

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
        """Local step k of the stacked clients (fedbench.engine.stacked.stacked_step): their
        gradients (vmap over the client dim), clipped per client, through the algorithm's
        gradient oracle and its elementwise rule on the stacked tensors."""
        stacked_step(self, self.setup.algorithm, y, buffers, local, xb, yb, mask, k, info)

    def whole_step(
        self,
        y: list[Tensor],
        buffers: dict[str, Tensor],
        local: State,
        xb: Tensor,
        yb: Tensor,
        mask: Tensor | None,
        k: int,
        info: RoundInfo,
    ) -> None:
        """The compiled stacked step (`tensor_scalars`) of local step k with the step's own
        info (`RoundInfo.at_step(k)`): its scalars as 0-d device tensors, so that the compiled
        graph freezes no value (fedbench.engine.captured)."""
        k_tensor, tensors = step_scalars(k, info, self.setup.device)
        self.stacked_step(y, buffers, local, xb, yb, mask, k_tensor, tensors)

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
        if self.step_graphs is not None and self._graphed_chunk is not None:
            # Fixed for the run once graphed: each new chunk size is a capture with buffers of
            # its own, which would leave less free memory, and so other sizes, for the next.
            return min(self._graphed_chunk, clients)
        chunk = auto_client_chunk(
            self._per_client_bytes, free_memory_bytes(self.setup.device), clients
        )
        self._graphed_chunk = chunk
        return chunk

    def _round(self, r: int, lr: float, diagnostics: bool = False) -> None:
        own = self.round_of(r, lr, diagnostics)
        if own is not None:  # None: every sampled client dropped out, no update this round
            (found,) = stacked_rounds([self], [own])
            self._after_round(own.results, found)

    def round_of(self, r: int, lr: float, diagnostics: bool) -> FederationRound | None:
        """Round r as the round protocol runs it (its clients trained as stacked rows,
        fedbench.engine.stacked.stacked_rounds); None when every sampled client dropped out."""
        clients = self.setup.schedule[r]
        if not clients:
            return None
        info = round_info(
            self.cfg.algorithm, r, lr, self.cfg.fl.local_steps, self.setup.num_clients, len(clients)
        )
        return FederationRound(self.federation(), clients, info, self._new_results(r, diagnostics))

    def batch_width(self, client: int) -> int:
        """The width of the client's batches (its whole local set with batch_size 0)."""
        batch, size = self.cfg.fl.batch_size, self.setup.client_sizes[client]
        return size if batch == 0 or batch >= size else batch

    def _groups(self, clients: list[int]) -> list[list[int]]:
        """The clients in groups trained apart: with BatchNorm, one group per batch width, as
        padded samples would enter the batch statistics; otherwise one group (padded)."""
        groups = width_groups([(0, c) for c in clients], [self])
        return [[client for _, client in group] for group in groups]
