"""Train-time augmentation on batched tensors (no PIL, no workers)."""

from __future__ import annotations

import torch
from torch import Tensor


def random_crop_flip(padding: int, pad_value: Tensor | None = None, flip: bool = True):
    """torchvision's RandomCrop(size, padding) + RandomHorizontalFlip, for a whole batch.

    `pad_value` (per channel) is what a zero pixel becomes after normalisation, so padding
    normalised images matches torchvision's order (pad the raw image with 0, then normalise).
    """

    def augment(x: Tensor, generator: torch.Generator) -> Tensor:
        n, c, h, w = x.shape
        padded = torch.nn.functional.pad(x, (padding, padding, padding, padding))
        if pad_value is not None:
            border = torch.ones(1, 1, h, w, device=x.device, dtype=x.dtype)
            border = torch.nn.functional.pad(border, (padding,) * 4) == 0
            padded = torch.where(border, pad_value.to(x).view(1, c, 1, 1), padded)
        off = torch.randint(0, 2 * padding + 1, (2, n), generator=generator, device="cpu").to(
            x.device
        )
        rows = off[0].view(n, 1) + torch.arange(h, device=x.device).view(1, h)
        cols = off[1].view(n, 1) + torch.arange(w, device=x.device).view(1, w)
        if flip:
            flips = (torch.rand(n, generator=generator, device="cpu") < 0.5).to(x.device)
            cols = torch.where(flips.view(n, 1), cols.flip(1), cols)
        batch = torch.arange(n, device=x.device).view(n, 1, 1, 1)
        chan = torch.arange(c, device=x.device).view(1, c, 1, 1)
        return padded[batch, chan, rows.view(n, 1, h, 1), cols.view(n, 1, 1, w)]

    return augment
