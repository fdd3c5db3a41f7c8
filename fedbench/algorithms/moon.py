"""MOON (Li, He & Song, "Model-Contrastive Federated Learning", CVPR 2021, Eq. 3-4): local SGD on
the cross-entropy plus a model-contrastive term that pulls the local representation toward the
global model's and away from the client's previous local model's.

For a batch, with z = R_y(x) the representation under the local weights y (the input of the
model's classification layer: fedbench.models.representation), z_glob = R_x(x) under the
round's global weights, z_prev = R_prev(x) under the client's last local model (fixed anchors,
no gradient), sim the cosine similarity and tau the temperature:

    l_con = -log( exp(sim(z, z_glob)/tau) / (exp(sim(z, z_glob)/tau) + exp(sim(z, z_prev)/tau)) )
    loss  = CE + mu * mean over the batch of l_con
    y <- y - eta_r * (grad loss + lambda * y)                            (each local step)
    prev_i <- y_i^K ;  x <- x + eta_g * Delta_bar                        (server: FedAvg's)

Departures: the paper appends a 2-layer projection head to the representation for l_con;
fedbench applies l_con to the classifier's input itself, so that any model that exposes its
representation runs MOON unchanged.

A client's first visit has no previous model. The authors' code (QinbinLi/MOON, main.py) keeps
an empty model pool in round 0, so its contrastive term is 0 there, and later uses the pool's
copy of every client's net: a client first sampled in round r > 0 contrasts against its own
never-trained, randomly initialised net. fedbench sets prev = x at a first visit, in every
round: z_prev = z_glob, so l_con = log 2 with zero gradient, which in round 0 is the authors'
behaviour (a zero term) and afterwards replaces their random net by "no contrastive push". The
reason: Eq. 3 defines z_prev from the client's model of its previous round, which does not exist
before a first visit; a random net is an artefact of the code keeping all N nets in memory, and
reproducing it would cost N extra models.

The anchors run in eval mode on the resident model with the anchor's weights swapped in
(functional_call), which swaps parameters only: with BatchNorm running statistics they would
normalise with the local model's statistics rather than their own, so models with BatchNorm
running statistics are refused (`model.norm: gn` runs). mu 1 (the paper's CIFAR-100 and
Tiny-ImageNet value; 5 for CIFAR-10), tau 0.5. comm_up d, comm_down d.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from pydantic import Field
from torch import Tensor
from torch.nn import functional as F

from fedbench.algorithms.base import RoundInfo, State, Tensors, Upload
from fedbench.algorithms.fedavg import FedAvg, FedAvgConfig
from fedbench.algorithms.registry import ALGORITHMS
from fedbench.algorithms.representation import RepresentationRule


class MoonConfig(FedAvgConfig):
    name: str = "moon"
    mu: float = Field(default=1.0, ge=0, description="weight of the model-contrastive loss")
    temperature: float = Field(default=0.5, gt=0, description="tau of the contrastive loss")


def model_contrastive_loss(z: Tensor, z_glob: Tensor, z_prev: Tensor, tau: float) -> Tensor:
    """Mean over the batch of -log(e^{s_g} / (e^{s_g} + e^{s_p})), s = cosine / tau."""
    positive = F.cosine_similarity(z, z_glob, dim=-1) / tau
    negative = F.cosine_similarity(z, z_prev, dim=-1) / tau
    return (torch.logaddexp(positive, negative) - positive).mean()


@ALGORITHMS.register("moon")
class Moon(FedAvg, RepresentationRule):
    """Local SGD with a model-contrastive term on the representation (needs the model's
    representation: cnn, resnet18, vit_tiny, timm models)."""

    Params = MoonConfig
    paper = "Li, He & Song 2021 (CVPR), MOON"
    client_state_desc = "its last local model (d floats)"
    params: MoonConfig
    #: Per-sample gradients of the contrastive term through the anchors are not implemented.
    supports_privacy = False

    def client_begin(
        self, x: Tensors, server: State, client_state: State | None, info: RoundInfo
    ) -> State:
        # x stays unchanged until the server step, so it is kept without a copy.
        return {"x": x, "prev": client_state["prev"] if client_state is not None else x}

    def representation_loss(
        self,
        z: Tensor,
        anchor: Callable[[Tensors], Tensor],
        local: State,
        info: RoundInfo,
    ) -> Tensor:
        if self.params.mu == 0:
            return z.new_zeros(())
        z_glob, z_prev = anchor(local["x"]), anchor(local["prev"])
        return self.params.mu * model_contrastive_loss(z, z_glob, z_prev, self.params.temperature)

    def client_end(
        self, y: Tensors, x: Tensors, local: State, client_state: State | None, info: RoundInfo
    ) -> tuple[Upload, State | None]:
        # y is the resident model, overwritten by the next client: the stored copy is a clone.
        return {"delta": torch._foreach_sub(y, x)}, {"prev": [t.detach().clone() for t in y]}
