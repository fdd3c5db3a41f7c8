"""`fedbench bench`: throughput of the engine against a bare PyTorch loop (issue 6).

The engine is driven directly (its rounds only: no evaluation, no checkpoint, nothing written
under results/). After `warmup` rounds, `rounds` rounds are timed; the bare loop then does the
same number of optimizer steps on a fresh copy of the same model, with the same data, batch
size, precision and compile setting: torch.optim.AdamW (foreach), the same gradient clipping,
no federated logic. Engine and bare runs alternate `repeats` times and the best of each is kept,
which makes the ratio robust to other processes sharing the CPU.

    client_steps_per_s = S * K * rounds / engine seconds
    bare_steps_per_s   = the same number of steps / bare seconds
    overhead           = engine seconds / bare seconds (per step)
    engine_peak_mem_mb = peak memory after the engine's first (warm-up) rounds, read before the
                         bare loop has run (a CPU process' peak RSS cannot be reset)
"""

from __future__ import annotations

import copy
import resource
import sys
import time
from typing import Any

import torch

from fedbench.config import RunConfig
from fedbench.engine.loop import Engine
from fedbench.engine.plan import ExecutionPlan
from fedbench.engine.run import select_engine
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.schedule import local_lr
from fedbench.engine.setup import RunSetup, prepare_run
from fedbench.files import temporary_folder
from fedbench.listing import Listing
from fedbench.step import Objective, autocast_context
from fedbench.threads import current_record


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_memory_mb(device: torch.device) -> float:
    """CUDA max allocated on a GPU, the process' peak resident set size on the CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10  # bytes on macOS, KiB on Linux


class BareLoop:
    """One model, torch.optim.AdamW, random batches from the resident training set."""

    def __init__(self, setup: RunSetup, plan: ExecutionPlan) -> None:
        cfg = setup.cfg
        self.setup = setup
        self.model = copy.deepcopy(setup.model).train()
        # Compiled and cast as the engine's plan says (the bare loop has no step to capture).
        compiled = plan.compile != "off"
        self.forward = torch.compile(self.model) if compiled else self.model
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.params = params
        self.optimizer = torch.optim.AdamW(
            params, lr=cfg.algorithm.lr, weight_decay=cfg.algorithm.weight_decay, foreach=True
        )
        self.clip = cfg.algorithm.grad_clip
        sizes = setup.client_sizes
        mean_size = sum(sizes) // len(sizes)
        self.batch_size = cfg.fl.batch_size if 0 < cfg.fl.batch_size < mean_size else mean_size
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.autocast = torch.bfloat16 if plan.precision == "bf16" else None

    def steps(self, n: int) -> None:
        data, device = self.setup.data, self.setup.device
        n_train, b = data.n_train, self.batch_size
        per_epoch = n_train // b
        done = 0
        while done < n:
            perm = torch.randperm(n_train, generator=self.generator).to(device)
            for j in range(min(per_epoch, n - done)):
                idx = perm[j * b : (j + 1) * b]
                xb, yb = data.x_train[idx], data.y_train[idx]
                if data.augment is not None:
                    xb = data.augment(xb, self.generator)
                if self.setup.prepare is not None:
                    xb = self.setup.prepare(xb)
                with autocast_context(device.type, self.autocast):
                    loss = Objective().loss(self.forward(xb), yb)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if self.clip is not None:
                    torch.nn.utils.clip_grad_norm_(self.params, self.clip, foreach=True)
                self.optimizer.step()
                done += 1


def run_bench(
    cfg: RunConfig, *, rounds: int = 3, warmup: int = 1, repeats: int = 3
) -> dict[str, Any]:
    """Measure the configured workload; returns the fields `fedbench bench --json` prints."""
    total_rounds = warmup + rounds * repeats
    cfg = cfg.model_copy(
        update={"fl": cfg.fl.model_copy(update={"rounds": max(cfg.fl.rounds, total_rounds)})}
    )
    setup = prepare_run(cfg)
    device = setup.device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with temporary_folder("fedbench-bench-") as tmp:
        engine = select_engine(setup, RunFolder(tmp), None)
        try:
            measured = _measure(engine, setup, rounds, warmup, repeats)
        finally:
            engine.close_layout()
    return {**measured, "peak_mem_mb": peak_memory_mb(device)}


def _measure(
    engine: Engine, setup: RunSetup, rounds: int, warmup: int, repeats: int
) -> dict[str, Any]:
    """run_bench's measurement, on `engine` with its CPU layout in place."""
    cfg, device = setup.cfg, setup.device
    engine.start_layout()
    engine_name = engine.name
    bare = BareLoop(setup, engine.plan)
    steps_per_round = len(setup.schedule[0]) * cfg.fl.local_steps

    def engine_rounds(first: int, count: int) -> float:
        _sync(device)
        t0 = time.perf_counter()
        for r in range(first, first + count):
            engine._round(r, local_lr(cfg.algorithm, r, cfg.fl.rounds))
        _sync(device)
        return time.perf_counter() - t0

    def bare_steps(count: int) -> float:
        _sync(device)
        t0 = time.perf_counter()
        bare.steps(count)
        _sync(device)
        return time.perf_counter() - t0

    # The engine runs first, so the peak read before the bare loop starts is the engine's.
    engine_times, bare_times = [], []
    if warmup:
        engine_rounds(0, warmup)
    else:
        engine_times.append(engine_rounds(0, rounds))
    engine_peak = peak_memory_mb(device)
    bare_steps(warmup * steps_per_round)
    for rep in range(len(engine_times), repeats):
        engine_times.append(engine_rounds(warmup + rep * rounds, rounds))
        bare_times.append(bare_steps(rounds * steps_per_round))
    if not bare_times:
        bare_times.append(bare_steps(rounds * steps_per_round))
    steps = rounds * steps_per_round
    engine_s, bare_s = min(engine_times), min(bare_times)
    # The plan's CUDA-graphs choice, and the vectorised executor's step graphs (captured,
    # replayed): a graphed row shows that its steps were replays.
    graphs = engine.plan["cuda_graphs"].value
    step_graphs = getattr(engine, "step_graphs", None)
    replayed = (
        {"captured": step_graphs.captured, "replays": step_graphs.replays}
        if step_graphs is not None
        else None
    )
    return {
        "workload": f"{cfg.model.name}/{cfg.data.name}",
        "algorithm": cfg.algorithm.name,
        "engine": engine_name,
        "device": str(device),
        "precision": engine.plan.precision,
        "compile": cfg.runtime.compile,
        "cuda_graphs": graphs,
        "step_graphs": replayed,
        "clients_per_round": len(setup.schedule[0]),
        "local_steps": cfg.fl.local_steps,
        "batch_size": cfg.fl.batch_size,
        "rounds": rounds,
        "repeats": repeats,
        "client_steps": steps,
        "client_steps_per_s": steps / engine_s,
        "bare_steps_per_s": steps / bare_s,
        "overhead": engine_s / bare_s,
        "engine_peak_mem_mb": engine_peak,
        "client_processes": 1 if engine.pool is None else 1 + len(engine.pool.processes),
        "threads": torch.get_num_threads(),
        "threads_reason": current_record()["reason"],
        "omp_wait_policy": current_record()["omp_wait_policy"],
    }


def result_listing(result: dict[str, Any]) -> Listing:
    """`fedbench bench` in the terminal: one row per field, floats to 3 decimals."""
    return Listing(
        f"fedbench bench: {result['workload']} ({result['algorithm']})",
        ["field", "value"],
        [[key, f"{v:.3f}" if isinstance(v, float) else str(v)] for key, v in result.items()],
        right=("value",),
    )
