"""FADAS (Wang, Wang, Lu, Chen, ICML 2024, "FADAS: Towards Federated Adaptive Asynchronous
Optimization"; official code github.com/yujiaw98/FADAS, option `--optimizer fedams`), in its
synchronous form: FedAvg's clients and server-side AMSGrad on the pseudo-gradient Delta_bar with
bias correction. A baseline of the FedAdamom paper.

Server m = 0, v = 0, v_max = `v_max_init` (the code's `--max_init`, default 0), round r = 0, 1, ...:
    m     <- beta1 * m + (1 - beta1) * Delta_bar
    v     <- beta2 * v + (1 - beta2) * Delta_bar^2
    v_max <- max(v_max, v)
    x     <- x + eta_g / (1 - beta1^(r+1)) * m / (sqrt(v_max) / sqrt(1 - beta2^(r+1)) + eps)
FADAS' delay-adaptive server lr (eta_g scaled by 1/tau_max once the largest staleness exceeds a
threshold) only acts on asynchronous buffers; in synchronous rounds every delay is 0 and it is 1.
A separate algorithm rather than a switch of fedadam: v starts at 0 (fedadam: tau^2), eps sits
outside the corrected root (fedadam: tau outside the uncorrected one) and it bias-corrects.
Defaults from the code's options.py: beta1 0.9, beta2 0.99, eps 1e-8; server lr 1e-4, the value
of the README's CIFAR-10 ResNet command without delay adaptation (asyncfl_forward.py; the
delay-adaptive command, g_delay_adaptive.py, uses 1e-3). comm_up d, comm_down d.
"""

from __future__ import annotations

import torch
from pydantic import Field

from fedbench.algorithms.adam import adam_step_, update_moments_
from fedbench.algorithms.base import Algorithm, RoundInfo, Scalar, State, Tensors, zeros_like
from fedbench.algorithms.fedavg import FedAvgConfig, sgd_step_
from fedbench.algorithms.registry import ALGORITHMS


class FADASConfig(FedAvgConfig):
    name: str = "fadas"
    server_lr: float = Field(
        default=1.0e-4,
        gt=0,
        description="eta of the server AMSGrad step (FADAS README, without delay adaptation)",
    )
    beta1: float = Field(
        default=0.9, ge=0, lt=1, description="decay of the server's first moment m"
    )
    beta2: float = Field(
        default=0.99, ge=0, lt=1, description="decay of the server's second moment v"
    )
    eps: float = Field(
        default=1.0e-8, gt=0, description="added outside the bias-corrected sqrt(v_hat)"
    )
    v_max_init: float = Field(
        default=0.0, ge=0, description="initial value of the running maximum v_hat"
    )


@ALGORITHMS.register("fadas")
class FADAS(Algorithm):
    """Local SGD; server AMSGrad (running max of v) with Adam's bias correction."""

    Params = FADASConfig
    capturable_step = True
    paper = "Wang et al., ICML 2024, FADAS (synchronous form; code yujiaw98/FADAS, fedams)"
    params: FADASConfig

    def init_server_state(self, x: Tensors) -> State:
        v_max = [torch.full_like(t, self.params.v_max_init) for t in x]
        return {"m": zeros_like(x), "v": zeros_like(x), "v_max": v_max}

    def server_update(
        self, x: Tensors, mean: dict[str, Tensors], server: State, info: RoundInfo
    ) -> None:
        p = self.params
        delta = mean["delta"]
        update_moments_(server["m"], server["v"], delta, p.beta1, p.beta2)
        torch._foreach_maximum_(server["v_max"], server["v"])
        step = info.round + 1
        # Delta_bar points downhill already: the server's Adam step adds it (lr = -eta_g).
        adam_step_(
            x,
            server["m"],
            server["v_max"],
            lr=-p.server_lr,
            bias_correction1=1.0 - p.beta1**step,
            bias_correction2=1.0 - p.beta2**step,
            eps=p.eps,
        )

    def local_step(self, y: Tensors, g: Tensors, local: State, k: Scalar, info: RoundInfo) -> None:
        sgd_step_(y, g, lr=info.lr, weight_decay=self.params.weight_decay)
