"""FedAdamW's block partitions by role: `auto` resolution, the DP-FedAdamW paper's `dp_paper`
partition, and LoRA B matrices partitioned like the weights they adapt."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

import pytest
import torch

from fedbench.algorithms.blocks import build_partition, resolve_blocks
from fedbench.config import ModelConfig
from fedbench.engine.setup import param_spec
from fedbench.models import build_model

LORA = {"r": 2, "alpha": 4, "dropout": 0.0}


def _spec(name: str, shape: tuple[int, ...], classes: int, lora: dict | None = None):
    return param_spec(build_model(ModelConfig(name=name, lora=lora), shape, classes))


def _counts(spec, kind: str) -> dict[str, int]:
    counts = build_partition(kind, spec.shapes, spec).block_counts()
    return dict(zip(spec.names, counts, strict=True))


@pytest.mark.parametrize(
    ("model", "shape", "expected"),
    [
        ("vit_tiny", (3, 32, 32), "hessian"),
        ("cnn", (1, 8, 8), "tensor"),
        ("resnet18", (3, 32, 32), "tensor"),
        ("logreg", (1, 8, 8), "tensor"),
    ],
)
def test_auto_is_hessian_exactly_where_roles_are_known(model, shape, expected) -> None:
    spec = _spec(model, shape, 10)
    assert resolve_blocks("auto", spec) == expected
    auto = build_partition("auto", spec.shapes, spec)
    assert auto.row_groups == build_partition(expected, spec.shapes, spec).row_groups
    assert resolve_blocks("auto", None) == "tensor"


def test_dp_paper_blocks_vit_tiny_equal_the_formula() -> None:
    """Per block: 4 norm tensors, qkv per head of each third (3 x 3 heads) + its bias, proj, fc1
    and fc2 one block each + their biases; then cls token, patch conv (2), final norm (2), head
    weight and bias."""
    spec = _spec("vit_tiny", (3, 32, 32), 10)
    per_block = 4 + (3 * 3 + 1) + 2 + 2 + 2
    assert build_partition("dp_paper", spec.shapes, spec).n_blocks == 6 * per_block + 5 + 2 == 127


def test_dp_paper_blocks_roberta_per_head_for_qkv_per_layer_otherwise() -> None:
    spec = _spec("roberta_micro", (128,), 2)
    dp, hessian = _counts(spec, "dp_paper"), _counts(spec, "hessian")
    layer = "model.roberta.encoder.layer.0."
    for role in ("query", "key", "value"):
        assert dp[layer + f"attention.self.{role}.weight"] == 2  # 2 heads
    assert hessian[layer + "attention.self.value.weight"] == 16  # hessian: per output row
    assert dp[layer + "attention.output.dense.weight"] == 1
    assert dp[layer + "intermediate.dense.weight"] == 1
    assert dp["model.roberta.embeddings.word_embeddings.weight"] == 1
    assert dp["model.classifier.out_proj.weight"] == 1
    assert dp[layer + "attention.self.query.bias"] == 1


def test_lora_b_is_partitioned_like_the_weight_it_adapts() -> None:
    spec = _spec("swin_micro", (3, 32, 32), 3, LORA)
    qkv_b = "layers.1.blocks.0.attn.qkv.lora_B.default.weight"  # (3 * 32, r), 2 heads
    hessian, dp = _counts(spec, "hessian"), _counts(spec, "dp_paper")
    assert hessian[qkv_b] == 2 + 2 + 32  # q, k per head; v per row
    assert dp[qkv_b] == 3 * 2  # q, k, v per head
    assert hessian["layers.1.blocks.0.attn.proj.lora_B.default.weight"] == 32
    assert dp["layers.1.blocks.0.attn.proj.lora_B.default.weight"] == 1
    assert hessian["layers.1.blocks.0.attn.qkv.lora_A.default.weight"] == 1
    assert resolve_blocks("auto", spec) == "hessian"


def test_dp_paper_means_and_expand_roundtrip_per_head() -> None:
    spec = _spec("vit_micro", (3, 32, 32), 4)
    part = build_partition("dp_paper", spec.shapes, spec)
    gen = torch.Generator().manual_seed(0)
    tensors = [torch.rand(s, generator=gen, dtype=torch.float64) for s in spec.shapes]
    expanded = part.expand(part.means(tensors))
    qkv = tensors[spec.names.index("blocks.0.attn.qkv.weight")]  # (96, 32), 2 heads of 16 rows
    got = expanded[spec.names.index("blocks.0.attn.qkv.weight")]
    for block in range(6):  # q, k, v x 2 heads
        rows = slice(16 * block, 16 * (block + 1))
        assert torch.allclose(got[rows], qkv[rows].mean().expand(16, 32), atol=1e-12)
    fc1 = spec.names.index("blocks.0.mlp.fc1.weight")
    assert torch.allclose(expanded[fc1], tensors[fc1].mean().expand_as(tensors[fc1]))
    torch.testing.assert_close(part.means(expanded), part.means(tensors), atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    ("model", "resolved", "total"), [("vit_tiny", "hessian", 8355), ("resnet18", "tensor", 62)]
)
def test_blocks_command_shows_what_auto_picks(run_cli, model, resolved, total) -> None:
    code, out, _ = run_cli("blocks", model)
    assert code == 0
    assert f"blocks: auto -> {resolved}" in out and f"B {total}" in out


def test_blocks_command_rejects_an_unknown_kind(run_cli) -> None:
    code, _, err = run_cli("blocks", "cnn", "--kind", "rows")
    assert code == 2 and "--kind rows" in err and "dp_paper" in err


def test_patch_embedding_is_one_block_per_output_channel_under_hessian_only() -> None:
    """Algorithm 3 slices every 'embed' parameter by its rows, and a patch embedding is a linear
    map of each patch (Class 2: per output neuron); dp_paper keeps one block per layer."""
    spec = _spec("vit_tiny", (3, 32, 32), 10)
    assert _counts(spec, "hessian")["patch_embed.weight"] == 192
    assert _counts(spec, "dp_paper")["patch_embed.weight"] == 1
    assert _counts(spec, "hessian")["patch_embed.bias"] == 1
    part = build_partition("hessian", spec.shapes, spec)
    i = spec.names.index("patch_embed.weight")  # (192, 3, 4, 4)
    tensors = [torch.zeros(s, dtype=torch.float64) for s in spec.shapes]
    tensors[i] = torch.arange(192 * 48, dtype=torch.float64).reshape(192, 3, 4, 4)
    got = part.expand(part.means(tensors))[i]
    # row c holds 48c..48c+47, mean 48c + 23.5
    expected = (48 * torch.arange(192, dtype=torch.float64) + 23.5).reshape(192, 1, 1, 1)
    torch.testing.assert_close(got, expected.expand(192, 3, 4, 4), atol=1e-12, rtol=0)


def test_module_blocks_join_a_modules_tensors() -> None:
    """blocks: module (Appendix D.3): one block per module, weight + bias + LoRA A and B
    together; means are over all of the module's coordinates."""
    from fedbench.algorithms.base import ParamSpec

    names = [
        "l.query.lora_A.default.weight",  # (1, 2): 1, 2
        "l.query.lora_B.default.weight",  # (2, 1): 3, 6   -> query block: 12 / 4 = 3
        "l.norm.weight",  # (2,): 4, 8
        "l.norm.bias",  # (2,): 0, 0                       -> norm block: 12 / 4 = 3
        "head.weight",  # (1, 3): 1, 1, 4                  -> head block: (6 + 9) / 4 = 3.75
        "head.bias",  # (1,): 9
    ]
    values = [[[1.0, 2.0]], [[3.0], [6.0]], [4.0, 8.0], [0.0, 0.0], [[1.0, 1.0, 4.0]], [9.0]]
    tensors = [torch.tensor(v, dtype=torch.float64) for v in values]
    spec = ParamSpec(names, [t.shape for t in tensors], {})
    part = build_partition("module", spec.shapes, spec)
    assert part.n_blocks == 3 and part.block_counts() == [1, 0, 1, 0, 1, 0]
    torch.testing.assert_close(
        part.means(tensors), torch.tensor([3.0, 3.0, 3.75], dtype=torch.float64), atol=1e-12, rtol=0
    )
    expanded = part.expand(part.means(tensors))
    assert [t.shape for t in expanded] == [t.shape for t in tensors]
    assert expanded[1].tolist() == [[3.0], [3.0]] and expanded[5].tolist() == [3.75]


def test_module_blocks_roberta_lora_two_per_layer() -> None:
    spec = _spec("roberta_micro", (128,), 2, {**LORA, "targets": ["query", "value"]})
    part = build_partition("module", spec.shapes, spec)
    # 2 layers x (query, value: A and B together) + classifier dense + out_proj
    assert part.n_blocks == 2 * 2 + 2
