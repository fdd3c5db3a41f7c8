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

from fedbench.algorithms.adam import adam_step_, update_moments_
from fedbench.algorithms.base import RoundInfo, State, Tensors, add_coupled_decay_
from fedbench.algorithms.local_adamw import LocalAdamW, LocalAdamWConfig
from fedbench.algorithms.registry import ALGORITHMS


class LocalAdamConfig(LocalAdamWConfig):
    name: str = "local_adam"


@ALGORITHMS.register("local_adam")
class LocalAdam(LocalAdamW):
    """Adam (coupled decay) restarted from zero moments every round: Local AdamW's state and
    server step, with the decay added to the gradient instead of decoupled."""

    Params = LocalAdamConfig
    paper = "Kingma & Ba 2015; baseline of Liu et al. 2026 (FedAdamW)"
    params: LocalAdamConfig

    def local_step(self, y: Tensors, g: Tensors, local: State, k: int, info: RoundInfo) -> None:
        p = self.params
        add_coupled_decay_(g, y, p.weight_decay)
        update_moments_(local["m"], local["v"], g, p.beta1, p.beta2)
        adam_step_(
            y,
            local["m"],
            local["v"],
            lr=info.lr,
            eps=p.eps,
            bias_correction1=1.0 - p.beta1**k,
            bias_correction2=1.0 - p.beta2**k,
        )
