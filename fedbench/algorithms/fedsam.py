"""FedSAM (Qu et al., "Generalized Federated Learning via Sharpness Aware Minimization", ICML
2022; Caldarola et al., ECCV 2022): local SGD on the sharpness-aware gradient, server averaging.

    e = rho * g1 / ||g1||         (g1 at y; ||.|| over all parameters)
    g2 = gradient at y + e
    y <- y - eta_r * (g2 + lambda * y)                                   (each local step)
    x <- x + eta_g * Delta_bar                                           (server)

Two gradients per step. The same rule, fed with privatised gradients, is DP-FedSAM (Shi et al.,
CVPR 2023; fedbench.algorithms.dp). rho 0.05. comm_up d, comm_down d.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from pydantic import Field

from fedbench.algorithms.base import GradientOracle, RoundInfo, Scalar, State, Tensors
from fedbench.algorithms.fedavg import FedAvg, FedAvgConfig
from fedbench.algorithms.registry import ALGORITHMS


class FedSAMConfig(FedAvgConfig):
    name: str = "fedsam"
    rho: float = Field(default=0.05, ge=0, description="SAM perturbation radius")


@ALGORITHMS.register("fedsam")
class FedSAM(FedAvg):
    """Local sharpness-aware minimisation (SAM) steps, server averaging."""

    Params = FedSAMConfig
    paper = "Qu et al. 2022 (ICML), FedSAM"
    params: FedSAMConfig
    #: Two gradients per step on its one batch (the dp_ twin's accountant: one release of a
    #: pair per step, fedbench.privacy.accounting).
    gradients_per_step: ClassVar[int] = 2

    def local_step_with_oracle(
        self,
        y: Tensors,
        gradient: GradientOracle,
        local: State,
        k: Scalar,
        info: RoundInfo,
    ) -> None:
        """g1 at y, then g2 at the SAM point y + e, and the SGD step with g2 from y. ||g1|| is
        over one client's parameters: per row on stacked clients (`GradientOracle.norm`)."""
        g1 = gradient()
        with torch.no_grad():
            # rho / (||g1|| + 1e-12) stays on the device: no host sync inside the step.
            e = gradient.scale(g1, self.params.rho / (gradient.norm(g1) + 1e-12))
            torch._foreach_add_(y, e)
        g2 = gradient()
        with torch.no_grad():
            torch._foreach_sub_(y, e)
            self.local_step(y, g2, local, k, info)
