"""Transformers (issue 7): Hessian blocks, LoRA rounds, pretrained-weight errors, the Table 3
quick path. Tiny random models only; nothing touches the network (HF_HUB_OFFLINE=1)."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"

from pathlib import Path

import pytest
import torch
import yaml

from fedbench.algorithms.blocks import build_partition
from fedbench.config import ModelConfig
from fedbench.engine.setup import param_spec
from fedbench.errors import FedbenchError
from fedbench.models import build_model

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def hessian_blocks(model: torch.nn.Module) -> int:
    spec = param_spec(model)
    return build_partition("hessian", spec.shapes, spec).n_blocks


def vit_formula(*, dim: int, depth: int, heads: int, mlp: int, classes: int, extra: int) -> int:
    """Algorithm 3 for one pre-norm ViT: per block norms 2x2, qkv 2*heads + dim (+ bias 1),
    proj dim (+1), fc1 mlp (+1), fc2 dim (+1); then `extra` tensor-blocks, head rows + bias."""
    per_block = 4 + (2 * heads + dim + 1) + (dim + 1) + (mlp + 1) + (dim + 1)
    return depth * per_block + extra + classes + 1


def test_hessian_blocks_vit_tiny_equal_the_formula():
    model = build_model(ModelConfig(name="vit_tiny"), (3, 32, 32), 10)
    # extra: cls token 1, patch conv one block per output channel (192) + bias 1, final norm 2
    # (positions are a buffer).
    expected = vit_formula(dim=192, depth=6, heads=3, mlp=768, classes=10, extra=1 + 192 + 1 + 2)
    assert hessian_blocks(model) == expected == 8355


def test_hessian_blocks_timm_vit_micro_equal_the_formula():
    model = build_model(ModelConfig(name="vit_micro"), (3, 32, 32), 4)
    # extra: cls token 1, pos_embed one block per token (16 patches + cls), patch conv one
    # block per output channel (32) + bias 1, norm 2.
    expected = vit_formula(dim=32, depth=2, heads=2, mlp=128, classes=4, extra=1 + 17 + 33 + 2)
    assert hessian_blocks(model) == expected


def test_hessian_partition_roundtrip_on_a_position_table():
    model = build_model(ModelConfig(name="vit_micro"), (3, 32, 32), 4)
    spec = param_spec(model)
    part = build_partition("hessian", spec.shapes, spec)
    tensors = [torch.randn(s) for s in spec.shapes]
    expanded = part.expand(part.means(tensors))
    pos = spec.names.index("pos_embed")
    assert torch.allclose(expanded[pos][0, :, 0], tensors[pos][0].mean(dim=1), atol=1e-6)
    qkv = spec.names.index("blocks.0.attn.qkv.weight")
    assert torch.allclose(expanded[qkv][:16], tensors[qkv][:16].mean().expand(16, 32), atol=1e-6)
    assert torch.allclose(part.means(expanded), part.means(tensors), atol=1e-6)


def test_hessian_blocks_roberta_per_head_and_per_row():
    model = build_model(ModelConfig(name="roberta_micro"), (128,), 2)
    spec = param_spec(model)
    counts = dict(zip(spec.names, build_partition("hessian", spec.shapes, spec).block_counts()))
    layer = "model.roberta.encoder.layer.0."
    assert counts[layer + "attention.self.query.weight"] == 2  # heads
    assert counts[layer + "attention.self.key.weight"] == 2
    assert counts[layer + "attention.self.value.weight"] == 16  # rows
    assert counts[layer + "intermediate.dense.weight"] == 32
    assert counts["model.roberta.embeddings.word_embeddings.weight"] == 1000  # tokens
    assert counts["model.classifier.out_proj.weight"] == 2  # classes
    assert counts[layer + "attention.self.query.bias"] == 1


def test_swin_micro_forward_and_lora_targets():
    model = build_model(
        ModelConfig(name="swin_micro", lora={"r": 2, "alpha": 4, "dropout": 0.0}), (3, 32, 32), 3
    )
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n or n.startswith("head.") for n in trainable)
    assert any("attn.proj.lora_A" in n for n in trainable)
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 3)


@pytest.mark.parametrize(
    ("model", "expected"),
    [("swin_tiny", "swin_tiny_patch4_window7_224_22k.pth"), ("vit_base", "vit_base_patch16_224")],
)
def test_missing_pretrained_weights_offline_is_one_clean_line(run_cli, tmp_path, model, expected):
    code, _, err = run_cli(
        "train", "--set", f"model.name={model}", "--set", "model.pretrained=true",
        "--set", "data.image_size=224", "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 2
    assert err.strip().count("\n") == 0 and "Traceback" not in err
    assert "pretrained weights" in err and expected in err and "model.weights" in err
    assert not (tmp_path / "runs").exists()


def test_missing_weights_file_and_roberta_folder(run_cli, tmp_path):
    code, _, err = run_cli(
        "train", "--set", "model.name=swin_tiny", "--set", "model.pretrained=true",
        "--set", f"model.weights={tmp_path}/nope.pth", "--set", "data.image_size=224",
    )  # fmt: skip
    assert code == 2 and "nope.pth does not exist" in err
    code, _, err = run_cli(
        "train", "--set", "model.name=roberta_base", "--set", "model.pretrained=true",
        "--set", "data.name=glue/sst2", "--set", "data.path=miniature",
        "--set", f"data.root={tmp_path}",
    )  # fmt: skip
    assert code == 2 and "roberta_base not found" in err and err.strip().count("\n") == 0


def test_timm_weights_file_loads_and_drops_the_head(tmp_path):
    from safetensors.torch import save_file

    from fedbench.models.timm_models import SPECS

    source = build_model(ModelConfig(name="vit_micro"), (3, 32, 32), 7)
    save_file(
        {k: v.contiguous() for k, v in source.state_dict().items()}, tmp_path / "w.safetensors"
    )
    spec = SPECS["vit_micro"]
    target = build_model(ModelConfig(name="vit_micro"), (3, 32, 32), 3)
    from fedbench.models.timm_models import _load_file

    _load_file(target, tmp_path / "w.safetensors", spec)
    assert torch.equal(target.blocks[0].attn.qkv.weight, source.blocks[0].attn.qkv.weight)
    assert target.head.weight.shape == (3, 32)


def _quick_table3_args(root: Path, method: str, task: str) -> list[str]:
    """`fedbench train` arguments of one Table 3 quick run: base, method, grid value, preset,
    with data.root `root` (created: a set data.root must exist)."""
    root.mkdir(parents=True, exist_ok=True)
    table = yaml.safe_load((CONFIGS / "table3.yaml").read_text())

    def flat(prefix: str, value) -> list[tuple[str, object]]:
        if isinstance(value, dict) and prefix.count(".") < 1 and prefix not in ("model.lora",):
            return [
                kv for k, v in value.items() for kv in flat(f"{prefix}.{k}" if prefix else k, v)
            ]
        return [(prefix, value)]

    pairs = flat("", table["base"]) + flat("", table["methods"][method])
    pairs += [("data.name", task), *table["presets"]["quick"].items(), ("data.root", str(root))]
    args = []
    for key, value in pairs:
        args += ["--set", f"{key}={yaml.safe_dump(value, default_flow_style=True).strip()}"]
    return [a.removesuffix("\n...") for a in args]


@pytest.mark.slow
def test_quick_table3_round_trip_trains_only_lora_and_head(run_cli, tmp_path):
    import json

    args = _quick_table3_args(tmp_path / "data", "FedAdamW", "glue/cola")
    args += [
        "--set",
        "algorithm.blocks=hessian",
        "--set",
        "fl.rounds=2",
        "--set",
        "algorithm.lr=0.01",
    ]
    code, _, err = run_cli("train", *args, "--out", str(tmp_path / "out"), "--save-model")
    assert code == 0, err
    run = next((tmp_path / "out" / "runs").iterdir())
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["round"] == 2 and -100 <= rows[-1]["test_acc"] <= 100  # CoLA: MCC x 100
    summary = json.loads((run / "summary.json").read_text())
    final = torch.load(run / "model.pt", weights_only=True)
    torch.manual_seed(0)  # the engine initialises the model from the run seed
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    initial = build_model(ModelConfig(**cfg["model"]), (128,), 2).state_dict()
    changed = {k for k in initial if not torch.equal(initial[k], final[k])}
    assert changed and all("lora_" in k or k.startswith("model.classifier.") for k in changed)
    assert any("lora_B" in k for k in changed) and any("classifier" in k for k in changed)
    trainable = sum(v.numel() for k, v in initial.items() if "lora_" in k or "classifier" in k)
    assert summary["d"] == trainable


def test_roberta_base_without_pretrained_is_the_real_architecture_with_random_weights() -> None:
    """--smoke and benchmarks/dp_ratio.py --paper build it on machines without the weights."""
    import torch

    from fedbench.config import ModelConfig
    from fedbench.models import build_model

    torch.manual_seed(0)
    lora = {"r": 16, "alpha": 32, "dropout": 0.0}
    model = build_model(ModelConfig(name="roberta_base", lora=lora), (128,), 2)
    config = model.model.config
    assert (config.num_hidden_layers, config.hidden_size, config.vocab_size) == (12, 768, 50265)
    assert config.max_position_embeddings == 514 and config.pad_token_id == 1
    total = sum(p.numel() for p in model.parameters())
    assert 124_000_000 < total < 126_000_000  # roberta-base's 124.6M + the new head
    ids = torch.randint(3, 50265, (2, 128))
    ids[:, 100:] = 1  # padding
    assert model(ids).shape == (2, 2)


def test_roberta_weights_without_a_pad_token_are_refused_when_built(tmp_path):
    """A config.json without pad_token_id (found by the type checker: the mask compared the ids
    with None and the first forward crashed with an AttributeError) is one FedbenchError."""
    from transformers import RobertaConfig, RobertaForSequenceClassification

    config = RobertaConfig(
        vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=8, max_position_embeddings=20, pad_token_id=None,
    )  # fmt: skip
    RobertaForSequenceClassification(config).save_pretrained(tmp_path)
    cfg = ModelConfig(name="roberta_base", pretrained=True, weights=str(tmp_path))
    with pytest.raises(FedbenchError, match="sets no pad_token_id"):
        build_model(cfg, (16,), 2)
