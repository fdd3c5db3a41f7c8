"""The representation contract: a classifier's output is `classify(represent(x))`, where the
representation z = represent(x) is the input of its final classification layer. Objectives
on representations (MOON's model-contrastive loss) use it, for any model that exposes it:

- a model with `represent(x)` and `classify(z)` methods (a `RepresentationClassifier`:
  fedbench's ResNet-18 and ViT);
- a timm model: z = forward_head(forward_features(x), pre_logits=True), classify = its
  classifier (`get_classifier()`);
- an nn.Sequential (logreg, cnn): z is the output of every layer but the last.

`represent_with` evaluates the representation under other weights (the global model, a
client's previous model) with torch.func.functional_call on the one resident model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from fedbench.errors import FedbenchError

Split = tuple[Callable[[Tensor], Tensor], Callable[[Tensor], Tensor]]


class RepresentationClassifier(nn.Module, ABC):
    """A classifier written as `classify(represent(x))`, so that objectives on its
    representation (MOON) reach z without a hook."""

    @abstractmethod
    def represent(self, x: Tensor) -> Tensor:
        """z: the input of the final classification layer."""

    @abstractmethod
    def classify(self, z: Tensor) -> Tensor:
        """The logits of representation z."""

    def forward(self, x: Tensor) -> Tensor:
        return self.classify(self.represent(x))


def representation_split(model: nn.Module) -> Split:
    """(represent, classify) of `model`, with classify(represent(x)) == model(x)."""
    # The duck-typed models below: their methods are attributes nn.Module does not declare.
    duck: Any = model
    if hasattr(model, "represent") and hasattr(model, "classify"):
        return duck.represent, duck.classify
    if hasattr(model, "forward_head") and hasattr(model, "get_classifier"):  # timm

        def timm_represent(x: Tensor) -> Tensor:
            return duck.forward_head(duck.forward_features(x), pre_logits=True)

        return timm_represent, duck.get_classifier()
    if isinstance(model, nn.Sequential) and len(model) > 1:
        return model[:-1], model[-1]
    raise FedbenchError(
        f"model {type(model).__name__} does not expose its representation (represent/classify "
        "methods, a timm model, or an nn.Sequential); use cnn, resnet18, vit_tiny or a timm model"
    )


class _Represent(nn.Module):
    """The representation as a module, so that functional_call can swap the model's weights."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        # Kept out of the module tree: an nn.Sequential slice registered as a second submodule
        # would give functional_call every weight under two names.
        self._represent = (representation_split(model)[0],)

    def forward(self, x: Tensor) -> Tensor:
        return self._represent[0](x)


class _RepresentAndClassify(nn.Module):
    """(z, classify(z)) with z = represent(x), as a module that functional_call can call with
    other weights (the vectorised engine's representation objective)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self._split = (representation_split(model),)  # out of the module tree, as in _Represent

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        represent, classify = self._split[0]
        z = represent(x)
        return z, classify(z)


def represent_and_classify(
    model: nn.Module,
) -> Callable[[Mapping[str, Tensor], Tensor], tuple[Tensor, Tensor]]:
    """f(tensors, x): the representation z of x and its logits classify(z), with the model's
    tensors named in `tensors` (parameters and buffers, by their names in the model) replaced:
    the functional form that torch.func differentiates and vmaps over stacked clients, in the
    model's own mode (training: as the sequential engine's represent/classify)."""
    wrapper = _RepresentAndClassify(model)

    def call(tensors: Mapping[str, Tensor], x: Tensor) -> tuple[Tensor, Tensor]:
        named = {f"model.{name}": t for name, t in tensors.items()}
        z, logits = torch.func.functional_call(wrapper, named, (x,))
        return z, logits

    return call


def check_anchor_statistics(model: nn.Module, model_name: str, algorithm: str) -> None:
    """Anchors under other weights (`represent_with`) swap the parameters only: with BatchNorm
    running statistics they would normalise with the local model's statistics instead of each
    anchor's own (MOON's z_glob and z_prev). fedbench keeps no per-anchor statistics, so such
    models are refused rather than given subtly wrong anchors."""
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and module.track_running_stats:
            raise FedbenchError(
                f"{algorithm} evaluates its loss under other weights than the local model's "
                f"(anchors, a personal model), but model {model_name} has BatchNorm running "
                "statistics, which those would share with the local model; use model.norm gn "
                "(or a model without BatchNorm)"
            )


def represent_with(model: nn.Module, names: list[str]) -> Callable[[list[Tensor], Tensor], Tensor]:
    """f(weights, x): the representation of x with the trainable parameters `names` replaced by
    `weights`, in eval mode (no dropout, BatchNorm's running statistics untouched) and without
    gradient: the fixed anchors of a contrastive objective."""
    wrapper = _Represent(model)
    keys = [f"model.{name}" for name in names]

    def evaluate(weights: list[Tensor], x: Tensor) -> Tensor:
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                return torch.func.functional_call(
                    wrapper, dict(zip(keys, weights, strict=True)), (x,)
                )
        finally:
            model.train(was_training)

    return evaluate
