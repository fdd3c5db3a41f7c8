"""LG-FedAvg (Liang, Liu, Ziyin, Allen, Auerbach, Brent, Salakhutdinov & Morency, "Think
Locally, Act Globally: Federated Learning with Local and Global Representations",
arXiv:2001.01523, 2020): local representation layers, a global head, the opposite split of
FedPer.

Client i keeps its body B (every trainable tensor but the model family's head H) and trains it
with the head, which the server averages:

    y_i <- (b_i, x_H)                             (b_i: its stored body; x_B on a first visit)
    y <- y - eta_r * (g + lambda * y)             (each local step, every tensor)
    b_i <- y_B ;  Delta_i = (0, y_H - x_H)        (the body is kept, only the head is sent)
    x_H <- x_H + eta_g * mean_i Delta_i,H         (server; x_B stays at its initialisation)

The authors' code keeps the last `num_layers_keep` layers global (2 for their CIFAR-10 CNN);
fedbench's global part is the model family's head. FL-bench's LG-FedAvg keeps its *first*
layers global, the opposite; fedbench follows the paper. The paper starts from a FedAvg-trained
model; `model.weights` (a FedAvg run's model.pt) reproduces that warm start.

Evaluation fine-tuning (and an unseen client): `finetune_steps` SGD steps on the body alone,
the head fixed (the paper's new devices learn a local representation for the global head).
comm_up d - L, comm_down d - L, L = the body's floats (= the head's size).
"""

from __future__ import annotations

from fedbench.algorithms.registry import ALGORITHMS
from fedbench.algorithms.split import SplitConfig, SplitMethod


class LGFedAvgConfig(SplitConfig):
    name: str = "lg_fedavg"


@ALGORITHMS.register("lg_fedavg")
class LGFedAvg(SplitMethod):
    """FedAvg on the head; each client's representation layers stay with it."""

    Params = LGFedAvgConfig
    paper = "Liang et al. 2020 (arXiv:2001.01523), LG-FedAvg"
    client_state_desc = "its body (L floats)"

    def personal_names(self) -> frozenset[str]:
        return frozenset(self.spec.names) - self.spec.head_params
