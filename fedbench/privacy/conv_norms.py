"""Per-sample gradient norms of Conv2d layers for Opacus' ghost clipping, without the per-sample
gradients of the whole batch in memory at once.

Opacus' fast gradient clipping has norm rules for Linear and Embedding only; for a convolution it
materialises the per-sample gradients (B x out x in*k*k, zero-filled, then copied). This rule is
the "mixed ghost norm" of Bu et al. (2023, "Differentially private optimization on large model at
small cost", Sec. 3): with a_j the unfolded input (in*k*k x L positions) and g_j the output
gradient (out x L) of sample j, the per-sample weight gradient is g_j a_j^T, and

    ||g_j a_j^T||_F^2 = <a_j^T a_j, g_j^T g_j>      (two L x L Gram matrices: "ghost norm")

which costs B*L^2*(in*k*k + out) instead of B*out*in*k*k*L. Per layer, the cheaper of the two
is used: the ghost norm for the deep layers (few positions, many channels), the materialised
gradient for the early ones. The bias gradient of sample j is sum over positions of g_j.
"""

from __future__ import annotations

import torch
from opacus.grad_sample.conv import compute_conv_grad_sample
from opacus.grad_sample.utils import register_norm_sampler
from opacus.utils.tensor_utils import unfold2d
from torch import Tensor, nn

from fedbench.privacy.book_keeping import ghost_squared_norms


def use_ghost_norm(positions: int, out_channels: int, unfolded: int) -> bool:
    """Bu et al.'s criterion: the Gram matrices (2 L^2) are smaller than the gradient (out*in*k*k)."""
    return 2 * positions * positions <= out_channels * unfolded


def conv2d_norm_sample(
    layer: nn.Conv2d, activations: list[Tensor], backprops: Tensor
) -> dict[Tensor, Tensor]:
    """{parameter: (B,) per-sample gradient norms} of one Conv2d layer."""
    # Opacus' unfold2d (here and inside compute_conv_grad_sample) strides over the input as if
    # it were NCHW-contiguous: an NHWC input (a channels_last model) would be read in the wrong
    # order. A no-op for NCHW.
    activations = [a.contiguous() for a in activations]
    if layer.groups != 1 or layer.padding_mode != "zeros" or isinstance(layer.padding, str):
        grads = compute_conv_grad_sample(layer, activations, backprops)
        return {p: g.flatten(1).norm(dim=1) for p, g in grads.items()}
    x = activations[0].to(backprops.dtype)
    batch = x.shape[0]
    g = backprops.reshape(batch, backprops.shape[1], -1)  # (B, out, L)
    out: dict[Tensor, Tensor] = {}
    if layer.weight.requires_grad:
        a = unfold2d(
            x,
            kernel_size=layer.kernel_size,
            padding=layer.padding,
            stride=layer.stride,
            dilation=layer.dilation,
        )  # (B, in*k*k, L)
        if use_ghost_norm(g.shape[2], g.shape[1], a.shape[1]):
            out[layer.weight] = ghost_squared_norms(a.mT, g.mT).sqrt()
        else:
            out[layer.weight] = torch.bmm(g, a.transpose(1, 2)).flatten(1).norm(dim=1)
    if layer.bias is not None and layer.bias.requires_grad:
        out[layer.bias] = g.sum(2).norm(dim=1)
    return out


def register() -> None:
    """Make `conv2d_norm_sample` Opacus' ghost-clipping norm rule for nn.Conv2d."""
    register_norm_sampler(nn.Conv2d)(conv2d_norm_sample)
