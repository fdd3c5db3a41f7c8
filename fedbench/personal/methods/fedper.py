"""FedPer (Arivazhagan, Aggarwal, Singh & Choudhary, "Federated Learning with Personalization
Layers", arXiv:1912.00818, 2019): a shared base, a personal head.

Client i keeps its personalisation layers (the model family's head H, fedbench.personal.heads)
and trains them with the base B, which the server averages as FedAvg does:

    y_i <- (x_B, h_i)                             (h_i: its stored head; x_H on a first visit)
    y <- y - eta_r * (g + lambda * y)             (each local step, every tensor)
    h_i <- y_H ;  Delta_i = (y_B - x_B, 0)        (the head is kept, only the base is sent)
    x_B <- x_B + eta_g * mean_i Delta_i,B         (server; x_H stays at its initialisation)

Evaluation fine-tuning (and an unseen client): `finetune_steps` SGD steps on the head alone,
the base fixed (FedRep's protocol for new clients; FedPer itself has none).
comm_up d - L, comm_down d - L, L = the head's floats.
"""

from __future__ import annotations

from fedbench.algorithms.registry import ALGORITHMS
from fedbench.algorithms.split import SplitConfig, SplitMethod


class FedPerConfig(SplitConfig):
    name: str = "fedper"


@ALGORITHMS.register("fedper")
class FedPer(SplitMethod):
    """FedAvg on the base; each client's head stays with it."""

    Params = FedPerConfig
    paper = "Arivazhagan et al. 2019 (arXiv:1912.00818), FedPer"
    client_state_desc = "its head (L floats)"

    def personal_names(self) -> frozenset[str]:
        return self.spec.head_params
