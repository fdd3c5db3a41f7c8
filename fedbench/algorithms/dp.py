"""DP variants of the algorithms (DP-FedAdamW paper, Liu et al.; sample-level DP).

`dp_X` is algorithm X fed with the privatised gradient g_tilde: the engine computes g_tilde
whenever the run has a `privacy:` section, so a variant only has to exist by name, require that
section and keep X's hyperparameters. Every registered algorithm with `supports_privacy` gets
such a twin (`register_plain_dp_variants`, run by fedbench.algorithms once every module is
imported); a variant with a rule of its own is registered under its dp_ name here and wins.

Variants with a rule of their own:
- dp_fedadamw: m_hat / (sqrt(max(v_hat - (sigma*C/B)^2, f*(sigma*C/B)^2)) + eps)   (`debias`,
      default true; `debias_floor` f is an addition, default 0.03 as measured in docs/privacy.md;
      f = 0 is the paper's literal form, clamped at 0)
- dp_fedavg_ls: Laplacian smoothing of g_tilde per flattened tensor,
      g <- IFFT( FFT(g) / (1 + 2*sigma_ls*(1 - cos(2*pi*j/n))) )      (sigma_ls 1.0)
- dp_fedsam: local SAM with two privatised gradients per step (rho 0.05):
      e = rho*g1/||g1||, g1 at y;  g2 at y + e;  y <- y - eta_r*(g2 + lambda*y)

The mechanism (clipping, noise), the accountant and the privacy plan live in fedbench.privacy.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
from pydantic import Field, create_model
from torch import Tensor

from fedbench.algorithms.base import (
    Algorithm,
    RoundInfo,
    Scalar,
    State,
    Tensors,
    addcdiv_scaled_,
)
from fedbench.algorithms.fedadamw import FedAdamW
from fedbench.algorithms.fedavg import FedAvg
from fedbench.algorithms.fedsam import FedSAM
from fedbench.algorithms.registry import ALGORITHMS

DP_PREFIX = "dp_"


def dp_variant(base: type[Algorithm], name: str, **fields: Any) -> type[Algorithm]:
    """A subclass of `base` named `name` that requires a privacy section; extra config fields
    are (type, FieldInfo-or-default) pairs as for pydantic.create_model."""
    params = create_model(
        f"DP{base.Params.__name__}", __base__=base.Params, name=(str, name), **fields
    )
    return type(
        f"DP{base.__name__}",
        (base,),
        {
            "Params": params,
            "paper": f"{base.paper}; DP variant: Liu et al., DP-FedAdamW (sample-level DP)",
            "requires_privacy": True,
            "__doc__": f"{base.__name__} fed with the privatised gradient g_tilde.",
        },
    )


def register_dp(base_name: str) -> type[Algorithm]:
    """Register dp_<base_name> = <base_name> fed with g_tilde. An unknown base, a base that does
    not support privacy, and a dp_ name already taken are errors."""
    if base_name not in ALGORITHMS:
        raise ValueError(f"register_dp: no algorithm {base_name!r} is registered")
    base = ALGORITHMS.get(base_name)
    if not base.supports_privacy or base.requires_privacy:
        raise ValueError(f"register_dp: {base_name!r} has no dp_ variant (supports_privacy)")
    cls = dp_variant(base, DP_PREFIX + base_name)
    cls.dp_twin_of = base_name  # X with a privacy section computes exactly this
    ALGORITHMS.register(DP_PREFIX + base_name)(cls)
    return cls


def register_plain_dp_variants() -> list[str]:
    """dp_X for every registered X that supports privacy and has no dp_ variant of its own;
    returns the names registered."""
    names = [
        DP_PREFIX + name
        for name, cls in ALGORITHMS.items()
        if cls.supports_privacy and not cls.requires_privacy and DP_PREFIX + name not in ALGORITHMS
    ]
    for name in names:
        register_dp(name.removeprefix(DP_PREFIX))
    return names


# --- dp_fedadamw ------------------------------------------------------------------------------


_DEBIAS_FIELDS = {
    "debias": (
        bool,
        Field(default=True, description="subtract the DP noise variance (sigma*C/B)^2 from v_hat"),
    ),
    # Not in the paper: a floor on the de-biased variance, as a fraction of (sigma*C/B)^2
    # (DP-AdamBC's gamma'). 0 is the paper's form, where every coordinate whose v_hat falls
    # below the noise variance gets the denominator eps and a step of order m_hat/eps. 0.03 is
    # the smallest of {0, 0.01, 0.03, 0.1, 0.3, 1} under which no measured run's train loss
    # exceeded 3x its round-0 value (3 seeds, dp_table2's quick and fmnist-small presets), and
    # larger floors lost accuracy (docs/privacy.md, "Choosing debias_floor").
    "debias_floor": (
        float,
        Field(
            default=0.03,
            ge=0,
            description="floor of the de-biased v_hat, in units of the noise variance "
            "(0: the paper's literal form)",
        ),
    ),
}


# (type: ignore[misc] on the three classes below: mypy cannot check a base class built at run time)
class DPFedAdamW(dp_variant(FedAdamW, "dp_fedadamw", **_DEBIAS_FIELDS)):  # type: ignore[misc]
    """DP-FedAdamW: FedAdamW on g_tilde with the DP-bias-corrected second moment."""

    paper = "Liu et al., DP-FedAdamW (Algorithm 1, Eq. 8)"

    def _adaptive_step_(
        self, y: Tensors, local: State, bc1: float, bc2: float, info: RoundInfo
    ) -> None:
        noise_var = info.grad_noise_std**2
        if not (self.params.debias and noise_var > 0):
            super()._adaptive_step_(y, local, bc1, bc2, info)
            return
        # sqrt(max(v_hat - (sigma*C/B)^2, 0)) + eps: the clamp keeps noise-dominated
        # coordinates finite (the paper's form takes the root of a negative number).
        v_hat = torch._foreach_div(local["v"], bc2)
        torch._foreach_sub_(v_hat, noise_var)
        torch._foreach_clamp_min_(v_hat, self.params.debias_floor * noise_var)
        denom = torch._foreach_sqrt(v_hat)
        torch._foreach_add_(denom, self.params.eps)
        addcdiv_scaled_(y, local["m"], denom, -info.lr / bc1)


ALGORITHMS.register("dp_fedadamw")(DPFedAdamW)


# --- dp_fedavg_ls -----------------------------------------------------------------------------


def laplacian_smooth(g: Tensor, sigma_ls: float) -> Tensor:
    """IFFT(FFT(g) / (1 + 2*sigma_ls*(1 - cos(2*pi*j/n)))) over the flattened tensor."""
    n = g.numel()
    if n <= 1 or sigma_ls == 0:
        return g
    flat = g.reshape(-1)
    j = torch.arange(n // 2 + 1, device=g.device, dtype=flat.dtype)
    denom = 1.0 + 2.0 * sigma_ls * (1.0 - torch.cos(2.0 * math.pi * j / n))
    return torch.fft.irfft(torch.fft.rfft(flat) / denom, n=n).reshape(g.shape)


class DPFedAvgLS(
    dp_variant(  # type: ignore[misc]
        FedAvg,
        "dp_fedavg_ls",
        sigma_ls=(float, Field(default=1.0, ge=0, description="Laplacian smoothing strength")),
    )
):
    """DP-FedAvg-LS (Liang et al. 2020): DP-FedAvg with Laplacian smoothing of g_tilde."""

    paper = "Liang et al. 2020, DP-FedAvg with Laplacian smoothing; baseline of DP-FedAdamW"
    #: The FFT mixes all entries of a tensor: on stacked clients it would mix the clients.
    supports_vectorized: ClassVar[bool] = False

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        smoothed = [laplacian_smooth(t, self.params.sigma_ls) for t in g]
        super().local_step(y, smoothed, local, k, info)


ALGORITHMS.register("dp_fedavg_ls")(DPFedAvgLS)


# --- dp_fedsam --------------------------------------------------------------------------------


class DPFedSAM(dp_variant(FedSAM, "dp_fedsam")):  # type: ignore[misc]
    """DP-FedSAM (Shi et al. 2023): FedSAM's local SAM step, both gradients privatised on the
    step's one batch (accounted as one subsampled release of the pair: a Gaussian at noise
    multiplier sigma / sqrt(2) per step)."""

    paper = "Shi et al. 2023 (CVPR), DP-FedSAM; baseline of DP-FedAdamW"


ALGORITHMS.register("dp_fedsam")(DPFedSAM)
