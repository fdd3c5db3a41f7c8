"""Train-time augmentation on batched tensors (no PIL, no workers)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from fedbench.data.base import Augment


def random_crop_flip(padding: int, pad_value: Tensor | None = None, flip: bool = True) -> Augment:
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


def normalise_uint8(mean: tuple[float, ...], std: tuple[float, ...]) -> Callable[[Tensor], Tensor]:
    """uint8 images in [0, 255] -> (x / 255 - mean) / std; float batches pass unchanged."""
    mean_t, std_t = torch.tensor(mean).view(1, -1, 1, 1), torch.tensor(std).view(1, -1, 1, 1)

    def prepare(x: Tensor) -> Tensor:
        if x.dtype != torch.uint8:
            return x
        return (x.float().div_(255.0) - mean_t.to(x.device)) / std_t.to(x.device)

    return prepare


def random_resized_crop_flip(
    to_float: Callable[[Tensor], Tensor],
    scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
) -> Augment:
    """torchvision's RandomResizedCrop(same size, scale, ratio) + RandomHorizontalFlip, per sample,
    for a whole batch in one grid_sample (bilinear). `to_float` turns the stored batch (uint8)
    into normalised floats first. Crops whose sides would exceed the image are clamped to it."""
    import math

    def augment(x: Tensor, generator: torch.Generator) -> Tensor:
        x = to_float(x)
        n = x.shape[0]
        u = torch.rand(4, n, generator=generator, device="cpu", dtype=torch.float64)
        area = scale[0] + (scale[1] - scale[0]) * u[0]
        log_r = math.log(ratio[0]) + (math.log(ratio[1]) - math.log(ratio[0])) * u[1]
        aspect = torch.exp(log_r)
        w_frac = torch.sqrt(area * aspect).clamp(max=1.0)
        h_frac = torch.sqrt(area / aspect).clamp(max=1.0)
        cx = (1 - w_frac) * (2 * u[2] - 1)
        cy = (1 - h_frac) * (2 * u[3] - 1)
        flip = torch.where(torch.rand(n, generator=generator) < 0.5, -1.0, 1.0).double()
        theta = torch.zeros(n, 2, 3, dtype=torch.float64)
        theta[:, 0, 0], theta[:, 0, 2] = w_frac * flip, cx
        theta[:, 1, 1], theta[:, 1, 2] = h_frac, cy
        theta = theta.to(device=x.device, dtype=x.dtype)
        grid = torch.nn.functional.affine_grid(theta, list(x.shape), align_corners=False)
        return torch.nn.functional.grid_sample(x, grid, mode="bilinear", align_corners=False)

    return augment
