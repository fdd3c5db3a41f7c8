"""What every system of benchmarks/peers/ shares: the workload's data (written once by run.py
from fedbench's own digits and IID partition), the same network (fedbench's `cnn`), the
clients' batches, and the one JSON line each system prints.

Each system's script imports torch before fedbench, so that fedbench's import does not set
the OpenMP wait policy of the process: the peers run with their own defaults."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROUNDS = 12
#: Rounds 3-12 are timed (the first two warm up).
TIMED_FROM = 2
CLIENTS_PER_ROUND = 5
LOCAL_STEPS = 20
BATCH = 32
LR = 0.05


def load(path: Path) -> dict[str, Any]:
    """x, y and each client's sample indices."""
    npz = np.load(path)
    parts = [npz[f"client_{i}"] for i in range(int(npz["clients"]))]
    return {"x": torch.from_numpy(npz["x"]), "y": torch.from_numpy(npz["y"]), "parts": parts}


def model() -> torch.nn.Module:
    """fedbench's `cnn` for the digits (8x8, 10 classes), initialised with seed 0."""
    from fedbench.config import ModelConfig
    from fedbench.models import build_model

    torch.manual_seed(0)
    return build_model(ModelConfig(name="cnn"), (1, 8, 8), 10)


def client_batches(part: np.ndarray, round_index: int, client: int) -> list[np.ndarray]:
    """K batches of B indices of one client: epochs of its samples in a random order (as
    fedbench draws them), seeded by (round, client)."""
    rng = np.random.default_rng([round_index, client])
    order = np.concatenate(
        [rng.permutation(part) for _ in range(LOCAL_STEPS * BATCH // len(part) + 1)]
    )
    return [order[k * BATCH : (k + 1) * BATCH] for k in range(LOCAL_STEPS)]


def sampled(round_index: int, clients: int) -> list[int]:
    rng = np.random.default_rng([1000, round_index])
    return sorted(rng.choice(clients, CLIENTS_PER_ROUND, replace=False).tolist())


def report(seconds: float, **extra: Any) -> None:
    """The one JSON line run.py reads: client steps/s over the timed rounds."""
    steps = (ROUNDS - TIMED_FROM) * CLIENTS_PER_ROUND * LOCAL_STEPS
    row = {
        "client_steps_per_s": steps / seconds,
        "timed_s": seconds,
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        **extra,
    }
    print(json.dumps(row), flush=True)


class RoundClock:
    """Times rounds TIMED_FROM.. : call `tick()` at the end of each round."""

    def __init__(self) -> None:
        self.ends: list[float] = []

    def tick(self) -> None:
        self.ends.append(time.perf_counter())

    def seconds(self) -> float:
        return self.ends[ROUNDS - 1] - self.ends[TIMED_FROM - 1]


def data_path() -> Path:
    return Path(os.environ.get("PEERS_DATA", sys.argv[1] if len(sys.argv) > 1 else "peers.npz"))
