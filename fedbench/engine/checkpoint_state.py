"""What a loaded checkpoint must hold before the engine resumes from it.

A checkpoint that torch can read may still be unusable: a hand-edited or truncated state, a dict
without the global model `x`, tensors of another model, a round past the run's end, or the state
of another run (its folder copied over this one). Each is a reason to set the checkpoint aside and
restart from round 0 (fedbench.engine.checkpoint) instead of crashing mid-resume or, worse,
truncating metrics.jsonl to the wrong length first.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

#: Every key the engine writes (fedbench.engine.loop.Engine._checkpoint).
KEYS = (
    "round",
    "x",
    "buffers",
    "server",
    "clients",
    "metrics_rows",
    "elapsed_s",
    "torch_rng",
    "run_id",
    "config_hash",
)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def tensors_problem(name: str, saved: Any, live: list[Tensor]) -> str | None:
    """Whether `saved` is a list of tensors with the shapes and dtypes of `live`."""
    if not isinstance(saved, list | tuple) or len(saved) != len(live):
        size = len(saved) if isinstance(saved, list | tuple) else type(saved).__name__
        return f"its {name} is not {len(live)} tensors ({size})"
    for i, (a, b) in enumerate(zip(saved, live, strict=True)):
        if not isinstance(a, Tensor) or a.shape != b.shape or a.dtype != b.dtype:
            got = f"{tuple(a.shape)} {a.dtype}" if isinstance(a, Tensor) else type(a).__name__
            return f"its {name}[{i}] is {got}, not {tuple(b.shape)} {b.dtype}"
    return None


def structure_problem(name: str, saved: Any, live: Any) -> str | None:
    """Whether `saved` has the layout of `live` (a fresh state of the same algorithm) where both
    have a value: same container kinds, list lengths and tensor shapes. Keys present in only one
    are allowed (algorithms may add state lazily)."""
    if isinstance(live, Tensor):
        if not isinstance(saved, Tensor) or saved.shape != live.shape:
            return f"its {name} is not a tensor of shape {tuple(live.shape)}"
        return None
    if isinstance(live, dict):
        if not isinstance(saved, dict):
            return f"its {name} is a {type(saved).__name__}, not a dict"
        pairs = [(f"{name}.{k}", saved[k], live[k]) for k in live.keys() & saved.keys()]
    elif isinstance(live, list | tuple):
        if not isinstance(saved, list | tuple) or len(saved) != len(live):
            return f"its {name} is not a list of {len(live)}"
        pairs = [(f"{name}[{i}]", a, b) for i, (a, b) in enumerate(zip(saved, live, strict=True))]
    else:
        return None
    return next((p for n, a, b in pairs if (p := structure_problem(n, a, b))), None)


def checkpoint_problem(
    ckpt: Any,
    *,
    owner: tuple[str, str],
    rounds: int,
    num_clients: int,
    x: list[Tensor],
    buffers: list[Tensor],
    server: Any,
    metrics_rows: int,
) -> str | None:
    """Why `ckpt` cannot resume the run `owner` = (run id, config hash), or None.

    `x`, `buffers` and `server` are the run's fresh state (their shapes are checked);
    `metrics_rows` is the number of complete rows in its metrics.jsonl.
    """
    if not isinstance(ckpt, dict):
        return f"it holds a {type(ckpt).__name__}, not a checkpoint"
    missing = [key for key in KEYS if key not in ckpt]
    if missing:
        return f"it lacks {', '.join(missing)}"
    if (ckpt["run_id"], ckpt["config_hash"]) != owner:
        return (
            f"it belongs to run {ckpt['run_id']} (config hash {str(ckpt['config_hash'])[:12]}), "
            f"not to {owner[0]} (config hash {owner[1][:12]})"
        )
    done = ckpt["round"]
    if not _is_int(done) or not 0 < done < rounds:
        return f"its round {done!r} is not one of 1..{rounds - 1}"
    rows = ckpt["metrics_rows"]
    if not _is_int(rows) or not 0 < rows <= metrics_rows:
        return f"it counts {rows!r} rows of metrics.jsonl, which has {metrics_rows}"
    elapsed = ckpt["elapsed_s"]
    if not isinstance(elapsed, int | float) or not math.isfinite(elapsed) or elapsed < 0:
        return f"its elapsed_s {elapsed!r} is not a time"
    rng = ckpt["torch_rng"]
    live_rng = torch.get_rng_state()
    if not isinstance(rng, Tensor) or rng.dtype != torch.uint8 or rng.shape != live_rng.shape:
        return "its torch_rng is not a generator state"
    clients = ckpt["clients"]
    if not isinstance(clients, dict) or not all(
        _is_int(k) and 0 <= k < num_clients for k in clients
    ):
        return f"its clients are not a dict keyed by client ids 0..{num_clients - 1}"
    return (
        tensors_problem("x", ckpt["x"], x)
        or tensors_problem("buffers", ckpt["buffers"], buffers)
        or structure_problem("server", ckpt["server"], server)
    )
