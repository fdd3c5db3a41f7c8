"""Model builders: output shapes, trainable parameter counts d, zero init, input adaptation."""

import pytest
import torch

from fedbench.config import ModelConfig
from fedbench.errors import FedbenchError
from fedbench.models import build_model, count_trainable


@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 28, 28), (3, 32, 32)])
def test_cnn_adapts_to_input_sizes(shape):
    model = build_model(ModelConfig(name="cnn"), shape, 10)
    assert model(torch.zeros(2, *shape)).shape == (2, 10)


def test_cnn_bn_is_the_cnn_with_batchnorm():
    plain = build_model(ModelConfig(name="cnn"), (1, 8, 8), 10)
    model = build_model(ModelConfig(name="cnn_bn"), (1, 8, 8), 10)
    assert model(torch.zeros(2, 1, 8, 8)).shape == (2, 10)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    assert [m.num_features for m in norms] == [32, 64, 128]
    # the cnn's d plus a weight and a bias per BatchNorm channel: 2 * (32 + 64 + 128)
    assert count_trainable(model) == count_trainable(plain) + 2 * (32 + 64 + 128)


def test_logreg_zero_init_and_d():
    model = build_model(ModelConfig(name="logreg", init="zeros"), (1, 8, 8), 10)
    assert count_trainable(model) == 64 * 10 + 10
    assert all(torch.all(p == 0) for p in model.parameters())


@pytest.mark.parametrize("norm,expected_bn", [("bn", True), ("gn", False)])
def test_resnet18_cifar_variant(norm, expected_bn):
    model = build_model(ModelConfig(name="resnet18", norm=norm), (3, 32, 32), 100)
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 100)
    assert model.conv1.kernel_size == (3, 3) and model.conv1.stride == (1, 1)
    has_bn = any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
    assert has_bn == expected_bn
    # 11.2M parameters for the CIFAR ResNet-18 with a 100-class head
    assert 11_100_000 < count_trainable(model) < 11_300_000


def test_vit_tiny_appendix_c_shape():
    model = build_model(ModelConfig(name="vit_tiny"), (3, 32, 32), 100)
    assert model.patch_embed.kernel_size == (4, 4)
    assert len(model.blocks) == 6 and model.blocks[0].attn.num_heads == 3
    assert model.head.in_features == 192
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 100)
    small = build_model(ModelConfig(name="vit_tiny"), (1, 8, 8), 10)
    assert small.patch_embed.kernel_size == (2, 2)


def test_image_model_on_flat_input_is_an_error():
    with pytest.raises(FedbenchError, match="logreg"):
        build_model(ModelConfig(name="cnn"), (32,), 10)


def test_resnet18_group_norm_groups_follow_the_config():
    from torch import nn

    from fedbench.config import ModelConfig
    from fedbench.models import build_model

    model = build_model(ModelConfig(name="resnet18", norm="gn", norm_groups=2), (3, 32, 32), 10)
    groups = {m.num_groups for m in model.modules() if isinstance(m, nn.GroupNorm)}
    assert groups == {2}
    default = build_model(ModelConfig(name="resnet18", norm="gn"), (3, 32, 32), 10)
    assert {m.num_groups for m in default.modules() if isinstance(m, nn.GroupNorm)} == {32}


def test_leaf_models_shapes_and_sizes():
    import torch
    from torch import nn

    from fedbench.config import ModelConfig
    from fedbench.models import build_model, count_trainable

    femnist = build_model(ModelConfig(name="leaf_femnist_cnn"), (1, 28, 28), 62)
    assert femnist(torch.zeros(2, 1, 28, 28)).shape == (2, 62)
    # LEAF's FEMNIST CNN: 832 + 51264 + 3136*2048+2048 + 2048*62+62 parameters
    assert count_trainable(femnist) == 832 + 51264 + 3136 * 2048 + 2048 + 2048 * 62 + 62
    celeba = build_model(ModelConfig(name="leaf_celeba_cnn"), (3, 84, 84), 2)
    assert celeba(torch.zeros(2, 3, 84, 84)).shape == (2, 2)
    assert celeba[-1].in_features == 32 * 6 * 6  # 84 -> 42 -> 21 -> 11 -> 6 (TF "same" pools)
    assert any(isinstance(m, nn.BatchNorm2d) for m in celeba.modules())
    lstm = build_model(ModelConfig(name="char_lstm"), (80,), 80)
    assert lstm(torch.randint(0, 80, (2, 80), dtype=torch.uint8)).shape == (2, 80)
    assert lstm.embed.embedding_dim == 8
    assert (lstm.lstm.hidden_size, lstm.lstm.num_layers) == (256, 2)
    small = build_model(ModelConfig(name="char_lstm_100"), (80,), 80)
    assert small(torch.randint(0, 80, (2, 80), dtype=torch.uint8)).shape == (2, 80)
    # embedding 80*8; two LSTM layers of 100 (4 gates, two biases each); dense 100 -> 80
    lstm_params = 4 * 100 * (8 + 100 + 2) + 4 * 100 * (100 + 100 + 2)
    assert count_trainable(small) == 80 * 8 + lstm_params + 100 * 80 + 80
