"""What "head" means for each model family, defined here and nowhere else.

A personalised method that keeps the head on the client (FedPer, FedRep, FedBABU, LG-FedAvg's
complement, FedRoD) reads `ParamSpec.head`, the trainable parameter names of the model's head,
which `head_names` fills in when a run is prepared. The head is the model's final
classification layer, the layer that maps the representation z to the logits (the split
fedbench.models.representation uses for MOON, as FedPer (Arivazhagan et al. 2019) and FedRep
(Collins et al. 2021) split "base" and "personalisation" layers):

| family | head |
|---|---|
| ResNet-18 (fedbench.models.resnet) | `fc` |
| ViT (fedbench.models.vit) | `head` (the LayerNorm before it is body) |
| nn.Sequential models (logreg, mlp, cnn, the LEAF CNNs) | the last layer with parameters |
| CharLSTM (LEAF Shakespeare) | `head` |
| Hugging Face text classifiers, with or without LoRA (RoBERTa) | `classifier` (its dense and out_proj layers: RoBERTa's classification head) |
| timm models | `get_classifier()` |

A model outside these families has no head (an empty set): a method that needs one refuses
the run in one line (`PersonalAlgorithm.check_head`).
"""

from __future__ import annotations

from torch import nn

#: Submodule names that are the head, by the model class's name (the classes live in
#: fedbench.models; matched by name so that this module imports no model code).
HEAD_MODULES: dict[str, str] = {
    "ResNet18": "fc",
    "ViT": "head",
    "CharLSTM": "head",
    "TextClassifier": "classifier",
}


def _head_module(model: nn.Module) -> nn.Module | None:
    """The model's head module, or None for a model of no known family."""
    name = HEAD_MODULES.get(type(model).__name__)
    if name is not None:
        for module_name, module in model.named_modules():
            # A Hugging Face model nests `classifier` under the wrapper (and LoRA's wrapper).
            if module_name == name or module_name.endswith(f".{name}"):
                return module
        return None
    if isinstance(model, nn.Sequential):
        with_params = [m for m in model if any(True for _ in m.parameters())]
        return with_params[-1] if with_params else None
    get_classifier = getattr(model, "get_classifier", None)  # timm
    if callable(get_classifier):
        found = get_classifier()
        return found if isinstance(found, nn.Module) else None
    return None


def head_names(model: nn.Module) -> frozenset[str]:
    """The trainable parameter names (as `model.named_parameters()` gives them) of the model's
    head; empty for a model of no known family."""
    head = _head_module(model)
    if head is None:
        return frozenset()
    ids = {id(p) for p in head.parameters()}
    return frozenset(n for n, p in model.named_parameters() if p.requires_grad and id(p) in ids)
