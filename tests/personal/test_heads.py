"""The head of every model family, as the one table in fedbench.personal.heads defines it."""

from __future__ import annotations

import pytest
from torch import nn

from fedbench.config import ModelConfig
from fedbench.models import build_model
from fedbench.personal.heads import head_names


def names(model: str, shape: tuple[int, ...], classes: int = 10, **cfg: object) -> frozenset[str]:
    return head_names(build_model(ModelConfig(name=model, **cfg), shape, classes))


def test_vision_families() -> None:
    assert names("resnet18", (3, 32, 32), norm="gn") == {"fc.weight", "fc.bias"}
    assert names("vit_nano", (3, 32, 32)) == {"head.weight", "head.bias"}
    # nn.Sequential: the last layer with parameters (cnn: Linear(128, C) at index 7 or so)
    cnn = build_model(ModelConfig(name="cnn"), (1, 8, 8), 10)
    last = [n for n, _ in cnn.named_parameters()][-2:]
    assert head_names(cnn) == set(last) and all(n.endswith(("weight", "bias")) for n in last)
    assert names("logreg", (1, 8, 8)) == {"1.weight", "1.bias"}
    assert names("leaf_femnist_cnn", (1, 28, 28), 62) == set(
        [n for n, _ in build_model(ModelConfig(name="leaf_femnist_cnn"), (1, 28, 28), 62)
         .named_parameters()][-2:]
    )  # fmt: skip


def test_lstm_and_text_families() -> None:
    assert names("char_lstm_100", (80,), 80) == {"head.weight", "head.bias"}
    pytest.importorskip("transformers")
    text = names("roberta_micro", (16,), 2)
    assert text == {
        "model.classifier.dense.weight",
        "model.classifier.dense.bias",
        "model.classifier.out_proj.weight",
        "model.classifier.out_proj.bias",
    }
    # With LoRA the classifier stays trainable and is still the head.
    lora = names("roberta_micro", (16,), 2, lora={})
    assert lora and all(".classifier." in n for n in lora)


def test_unknown_family_has_no_head() -> None:
    class Custom(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(2, 2)

    assert head_names(Custom()) == frozenset()
    assert head_names(nn.Sequential(nn.ReLU())) == frozenset()


def test_frozen_parameters_are_not_head() -> None:
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 2))
    model[1].bias.requires_grad_(False)
    assert head_names(model) == {"1.weight"}
