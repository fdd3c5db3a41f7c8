"""Local Adam: a fresh torch.optim.Adam (coupled L2 weight decay) on every client every round
(Kingma & Ba, ICLR 2015; a baseline of the FedAdamW paper).

    m, v <- 0 at the start of each round;  k = 1..K
    g <- g + lambda * y
    m <- beta1*m + (1-beta1)*g ;  v <- beta2*v + (1-beta2)*g^2
    y <- y - eta_r * (m / (1-beta1^k)) / (sqrt(v / (1-beta2^k)) + eps)

Identical to recreating torch.optim.Adam(lr, betas, eps, weight_decay=lambda) each round. The
server averages the models (default step). comm_up d, comm_down d.
"""

from __future__ import annotations

from fedbench.algorithms.local_adamw import LocalAdamW, LocalAdamWConfig
from fedbench.algorithms.registry import ALGORITHMS


class LocalAdamConfig(LocalAdamWConfig):
    name: str = "local_adam"


@ALGORITHMS.register("local_adam")
class LocalAdam(LocalAdamW):
    """Adam (coupled decay) restarted from zero moments every round: Local AdamW with the decay
    added to the gradient instead of decoupled."""

    Params = LocalAdamConfig
    paper = "Kingma & Ba 2015; baseline of Liu et al. 2026 (FedAdamW)"
    params: LocalAdamConfig
    decoupled_decay = False
