"""THE round loop: every algorithm, every dataset, one code path (DESIGN.md, data flow
CLI -> config -> plan -> launcher -> engine -> run folder -> report)."""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from torch import Tensor

import fedbench
from fedbench.algorithms.base import RoundInfo, State
from fedbench.config import RunConfig
from fedbench.data.partition import describe
from fedbench.engine.checkpoint import load_checkpoint, save_checkpoint
from fedbench.engine.client import run_client
from fedbench.engine.evaluate import evaluate, train_subset_indices
from fedbench.engine.progress import make_progress
from fedbench.engine.run_folder import RunFolder, write_json_atomic
from fedbench.engine.schedule import local_lr, participation_counts
from fedbench.engine.setup import RunSetup, prepare_run
from fedbench.errors import DivergedError


@dataclass
class RunResult:
    run_dir: Path
    status: str  # completed | diverged | failed | skipped (already finished)
    summary: dict[str, Any]


def _squared_norm(tensors: list[Tensor]) -> Tensor:
    return torch.stack([n.double() for n in torch._foreach_norm(tensors)]).square().sum()


class Aggregator:
    """Streaming (weighted) mean of the clients' uploads and float buffers: nothing per client.

    With `spread_of`, it also sums the clients' squared norms of that upload, so that
    mean_i ||u_i - u_bar||^2 = mean_i ||u_i||^2 - ||u_bar||^2 needs no per-client copy.
    """

    def __init__(self, spread_of: str | None = None) -> None:
        self.sums: dict[str, list[Tensor]] = {}
        self.total = 0.0
        self.spread_of = spread_of
        self.squared_norms: Tensor | float = 0.0

    def add(self, upload: dict[str, list[Tensor]], weight: float) -> None:
        for key, tensors in upload.items():
            if key not in self.sums:
                self.sums[key] = [t.detach().mul(weight) for t in tensors]
            else:
                torch._foreach_add_(self.sums[key], list(tensors), alpha=weight)
        if self.spread_of is not None:
            self.squared_norms = self.squared_norms + weight * _squared_norm(upload[self.spread_of])
        self.total += weight

    def means(self) -> dict[str, list[Tensor]]:
        return {k: torch._foreach_div(v, self.total) for k, v in self.sums.items()}

    def spread(self, mean: list[Tensor]) -> float:
        """(Weighted) mean squared distance of the `spread_of` uploads to their mean."""
        value = float(self.squared_norms) / self.total - float(_squared_norm(mean))
        return max(value, 0.0)  # rounding can make an exact zero slightly negative


def _state_buffers(model: torch.nn.Module) -> list[Tensor]:
    """Buffers saved in the state_dict (BatchNorm statistics), in a fixed order."""
    keys = set(model.state_dict())
    return [b for name, b in model.named_buffers() if name in keys]


def _all_finite(tensors: list[Tensor]) -> bool:
    return bool(torch.isfinite(torch.stack([t.float().sum() for t in tensors])).all())


def _to_device(state: Any, device: torch.device) -> Any:
    """A client state (dicts / lists of tensors) with every tensor on `device`."""
    if isinstance(state, Tensor):
        return state.to(device)
    if isinstance(state, dict):
        return {k: _to_device(v, device) for k, v in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(_to_device(v, device) for v in state)
    return state


def client_state_device(store: str, compute: torch.device) -> torch.device:
    """Where the per-client state store lives between rounds (`runtime.client_state_device`):
    `cpu`, `device` (beside the model), or `auto`: the CPU when the model is on an accelerator,
    because N model-sized states rarely fit beside it."""
    if store == "cpu" or (store == "auto" and compute.type != "cpu"):
        return torch.device("cpu")
    return compute


def round_diagnostics(
    agg: Aggregator, mean: dict[str, list[Tensor]], v_means: list[Tensor]
) -> dict[str, Any]:
    """FedAdamW Figure 2: client_drift = mean_i ||Delta_i - Delta_bar||^2 and v_spread = the
    variance across clients of each block mean of v, averaged over the blocks (None without v)."""
    return {
        "client_drift": agg.spread(mean["delta"]),
        "v_spread": (
            float(torch.stack(v_means).var(dim=0, unbiased=False).mean()) if v_means else None
        ),
    }


class Engine:
    """Runs one configured federation in a run folder, resuming from its checkpoint."""

    def __init__(self, setup: RunSetup, folder: RunFolder, console: Console | None) -> None:
        self.s = setup
        self.cfg: RunConfig = setup.cfg
        self.folder = folder
        self.console = console
        model = setup.model
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.buffers = _state_buffers(model)
        self.x = [p.detach().clone() for p in self.params]
        self.global_buffers = [b.detach().clone() for b in self.buffers]
        self.server: State = setup.algorithm.init_server_state(self.x)
        self.client_states: dict[int, State] = {}
        self.state_device = client_state_device(self.cfg.runtime.client_state_device, setup.device)
        self.diagnostics: dict[str, float | None] = {"client_drift": None, "v_spread": None}
        self.forward = torch.compile(model) if self.cfg.runtime.compile else model
        self.autocast = torch.bfloat16 if self.cfg.runtime.precision == "bf16" else None
        plan = setup.privacy
        self.private = plan.mechanism(model, self.params, self.autocast) if plan else None
        n_train = setup.data.n_train
        subset = train_subset_indices(n_train, self.cfg.eval.train_subset, self.cfg.seed)
        self.train_eval_idx = torch.as_tensor(subset, device=setup.device)
        self.metrics_rows = 0
        self.elapsed_before = 0.0

    # --- state ----------------------------------------------------------------------------------
    def _load_global(self) -> None:
        with torch.no_grad():
            torch._foreach_copy_(self.params, self.x)
            for b, g in zip(self.buffers, self.global_buffers, strict=True):
                b.copy_(g)

    def _checkpoint(self, rounds_done: int, elapsed: float) -> None:
        save_checkpoint(
            self.folder.checkpoint,
            {
                "round": rounds_done,
                "x": self.x,
                "buffers": self.global_buffers,
                "server": self.server,
                "clients": self.client_states,
                "metrics_rows": self.metrics_rows,
                "elapsed_s": elapsed,
                "torch_rng": torch.get_rng_state(),
            },
        )

    def _resume(self) -> int:
        ckpt = load_checkpoint(self.folder.checkpoint, self.s.device)
        if ckpt is None:
            self.folder.metrics.write_text("")
            return 0
        self.x = ckpt["x"]
        self.global_buffers = ckpt["buffers"]
        self.server = ckpt["server"]
        self.client_states = {
            int(k): _to_device(v, self.state_device) for k, v in ckpt["clients"].items()
        }
        self.metrics_rows = ckpt["metrics_rows"]
        self.elapsed_before = ckpt["elapsed_s"]
        torch.set_rng_state(ckpt["torch_rng"])
        # Rows written after the checkpoint are recomputed, so the file matches an uninterrupted run.
        self.folder.truncate_metrics(self.metrics_rows)
        return int(ckpt["round"])

    # --- evaluation -----------------------------------------------------------------------------
    def _evaluate(self, rounds_done: int, lr: float, elapsed: float) -> dict[str, Any]:
        s, cfg = self.s, self.cfg
        self._load_global()
        acc, test_loss = evaluate(
            s.model, s.data.x_test, s.data.y_test, cfg.eval.batch_size, s.prepare, s.data.metric
        )
        idx = self.train_eval_idx
        _, train_loss = evaluate(
            s.model, s.data.x_train[idx], s.data.y_train[idx], cfg.eval.batch_size, s.prepare
        )
        sampled = len(s.schedule[0])
        row = {
            "round": rounds_done,
            "test_acc": acc,
            "test_loss": test_loss,
            "train_loss": train_loss,
            "lr": lr,
            "comm_up": s.algorithm.comm_up() * sampled * rounds_done,
            "comm_down": s.algorithm.comm_down() * sampled * rounds_done,
            "elapsed_s": round(elapsed, 3),
        }
        if cfg.eval.diagnostics:
            row.update(self.diagnostics)
        if s.privacy is not None:
            row["epsilon"] = s.privacy.epsilon(rounds_done)
        self.folder.append_metrics(row)
        self.metrics_rows += 1
        return row

    # --- one round ------------------------------------------------------------------------------
    def _round(self, r: int, lr: float, diagnostics: bool = False) -> None:
        """One round; with `diagnostics`, also FedAdamW Figure 2's client_drift and v_spread."""
        s, cfg = self.s, self.cfg
        clients = s.schedule[r]
        info = RoundInfo(r, lr, cfg.fl.local_steps, s.num_clients, len(clients))
        agg = Aggregator(spread_of="delta" if diagnostics else None)
        buffer_agg = Aggregator()
        v_means: list[Tensor] = []
        int_buffers: list[Tensor] | None = None
        for client in clients:
            self._load_global()
            stored = self.client_states.get(client)
            if stored is not None:
                stored = _to_device(stored, s.device)
            local = s.algorithm.client_begin(self.x, self.server, stored, info)
            run_client(
                model=s.model,
                forward=self.forward,
                params=self.params,
                algorithm=s.algorithm,
                local=local,
                info=info,
                data=s.data,
                samples=s.clients[client],
                batch_size=cfg.fl.batch_size,
                seed=cfg.seed,
                client=client,
                grad_clip=cfg.algorithm.grad_clip,
                prepare=s.prepare,
                autocast=self.autocast,
                private=self.private,
                poisson=s.privacy is not None and s.privacy.config.sampling == "poisson",
            )
            with torch.no_grad():
                upload, new_state = s.algorithm.client_end(
                    [p.detach() for p in self.params], self.x, local, stored, info
                )
            if new_state is not None:
                self.client_states[client] = _to_device(new_state, self.state_device)
            if diagnostics:
                block_means = s.algorithm.v_block_means(local)
                if block_means is not None:
                    v_means.append(block_means.double())
            weight = float(s.client_sizes[client]) if cfg.algorithm.weighting == "samples" else 1.0
            agg.add(upload, weight)
            floats = [b for b in self.buffers if b.is_floating_point()]
            if floats:
                buffer_agg.add({"b": floats}, weight)
            if int_buffers is None:  # integer buffers (BN step counters) take the first client's
                int_buffers = [
                    b.detach().clone() for b in self.buffers if not b.is_floating_point()
                ]
        mean = agg.means()
        if not _all_finite(mean["delta"]):
            raise DivergedError(f"non-finite model update in round {r + 1}")
        if diagnostics:
            self.diagnostics = round_diagnostics(agg, mean, v_means)
        with torch.no_grad():
            s.algorithm.server_update(self.x, mean, self.server, info)
            float_means = iter(buffer_agg.means().get("b", []))
            int_values = iter(int_buffers or [])
            for g in self.global_buffers:
                g.copy_(next(float_means) if g.is_floating_point() else next(int_values))

    # --- the run ----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg = self.cfg
        rounds = cfg.fl.rounds
        start = self._resume()
        t0 = time.perf_counter()
        progress = make_progress(self.console, self.folder.path.name)
        progress.start(rounds, start)
        status, error = "completed", None
        diverged_round = None
        try:
            if start == 0:
                self._evaluate(0, local_lr(cfg.algorithm, 0, rounds), self.elapsed_before)
            for r in range(start, rounds):
                lr = local_lr(cfg.algorithm, r, rounds)
                done = r + 1
                evaluated = done % cfg.eval.every == 0 or done == rounds
                self._round(r, lr, diagnostics=evaluated and cfg.eval.diagnostics)
                elapsed = self.elapsed_before + time.perf_counter() - t0
                row = None
                if evaluated:
                    row = self._evaluate(done, lr, elapsed)
                    if not (
                        row["train_loss"] == row["train_loss"]
                        and abs(row["train_loss"]) < float("inf")
                    ):
                        raise DivergedError(f"non-finite training loss in round {done}")
                if (
                    cfg.runtime.checkpoint_every
                    and done % cfg.runtime.checkpoint_every == 0
                    and done < rounds
                ):
                    self._checkpoint(done, elapsed)
                progress.advance(done, row)
        except DivergedError as exc:
            status, error = "diverged", str(exc)
            diverged_round = r + 1
        finally:
            progress.close()
        wall = self.elapsed_before + time.perf_counter() - t0
        return self._summary(status, error, diverged_round, wall)

    def _summary(
        self, status: str, error: str | None, diverged_round: int | None, wall: float
    ) -> dict[str, Any]:
        cfg, s = self.cfg, self.s
        rows = self.folder.read_metrics()
        final = rows[-1] if rows else {}
        best = max(rows, key=lambda row: row["test_acc"]) if rows else {}
        summary = {
            "run_id": self.folder.path.name,
            "status": status,
            "error": error,
            "diverged_round": diverged_round,
            "algorithm": cfg.algorithm.name,
            "rounds": cfg.fl.rounds,
            "final": {k: final.get(k) for k in ("round", "test_acc", "test_loss", "train_loss")},
            "best": {"round": best.get("round"), "test_acc": best.get("test_acc")},
            "d": s.algorithm.spec.d,
            "comm_up": s.algorithm.comm_up(),
            "comm_down": s.algorithm.comm_down(),
            "clients_per_round": len(s.schedule[0]),
            "participation_counts": participation_counts(s.schedule, s.num_clients),
            "epsilon": s.privacy.epsilon() if s.privacy else None,
            "delta": s.privacy.config.delta if s.privacy else None,
            "noise_multiplier": s.privacy.noise_multiplier if s.privacy else None,
            "wall_s": round(wall, 3),
            "device": str(s.device),
            "versions": {
                "fedbench": fedbench.__version__,
                "torch": torch.__version__,
                "python": platform.python_version(),
            },
        }
        self.folder.write_summary(summary)
        if self.folder.checkpoint.exists():
            self.folder.checkpoint.unlink()
        return summary


def train(
    cfg: RunConfig, out: Path, *, save_model: bool = False, console: Console | None = None
) -> RunResult:
    """Run (or resume, or skip if finished) the configured federation under out/runs/<run_id>/."""
    folder = RunFolder.for_config(out, cfg)
    if folder.is_finished():
        return RunResult(folder.path, "skipped", folder.read_summary() or {})
    setup = prepare_run(cfg)  # every user error is raised here, before anything is written
    folder.create(cfg)
    write_json_atomic(
        folder.partition,
        describe(setup.partition_arrays, setup.data.y_train.cpu().numpy(), setup.data.num_classes),
    )
    from fedbench.engine.vectorized import select_engine  # imports this module

    engine = select_engine(setup, folder, console)
    try:
        summary = engine.run()
    except Exception as exc:
        summary = {
            "run_id": folder.path.name,
            "status": "failed",
            "error": f"{type(exc).__name__}: {exc}",
        }
        folder.write_summary(summary)
        raise
    if save_model and summary["status"] == "completed":
        engine._load_global()
        torch.save(setup.model.state_dict(), folder.model)
    return RunResult(folder.path, summary["status"], summary)
