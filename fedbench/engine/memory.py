"""How many clients the vectorised engine trains at once (`runtime.client_chunk`).

Training S clients together keeps S copies of the weights, gradients and local state and S
batches of activations alive; a chunk of c clients keeps c of them. `auto` picks the largest
chunk whose estimate fits in half the free device memory (the other half is headroom for the
allocator, the data set and the estimate's error).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import Tensor, nn

#: Fraction of the free device memory that `auto` lets the stacked clients use.
AUTO_FRACTION = 0.5
#: Model-sized tensors per client besides the weights: gradient, start point, local state
#: (Adam's two moments and a correction or two). An over-estimate errs toward small chunks.
MODEL_COPIES = 6
#: Activation bytes per forward output element (the output itself and its gradient).
ACTIVATION_FACTOR = 2


def free_memory_bytes(device: torch.device) -> int:
    """Free memory on `device`: CUDA's free bytes, the CPU's available RAM (Linux MemAvailable)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def activation_bytes_per_sample(model: nn.Module, sample: Tensor) -> int:
    """Bytes of every leaf module's forward output for one sample (what backward keeps)."""
    total = 0

    def count(_module: nn.Module, _inputs: object, output: object) -> None:
        nonlocal total
        if isinstance(output, Tensor):
            total += output.numel() * output.element_size()

    leaves = [m for m in model.modules() if not list(m.children())]
    handles = [m.register_forward_hook(count) for m in leaves]
    was_training = model.training
    try:
        with torch.no_grad():
            model.eval()  # no BatchNorm statistics update from the probe
            model(sample.unsqueeze(0))
    finally:
        model.train(was_training)
        for h in handles:
            h.remove()
    return total


def client_bytes(model: nn.Module, sample: Tensor, batch_size: int) -> int:
    """Estimated bytes one more client adds to a vectorised step."""
    weights = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    activations = ACTIVATION_FACTOR * activation_bytes_per_sample(model, sample) * batch_size
    return MODEL_COPIES * weights + activations


def auto_client_chunk(per_client: int, free: int, clients: int) -> int:
    """The largest chunk (1..clients) whose estimate fits in AUTO_FRACTION of `free` bytes."""
    fits = int(AUTO_FRACTION * free) // max(1, per_client)
    return max(1, min(clients, fits))
