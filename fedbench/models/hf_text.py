"""RoBERTa-Base + LoRA through transformers and peft (FedAdamW Table 3, DP-FedAdamW Table 4).

Inputs are token ids (n, max_len) int64, padded with the tokenizer's pad id (1 for RoBERTa);
`TextClassifier` builds the attention mask from the padding and returns logits, so the local
objective (fedbench.step.objective: the loss of forward(x) against y) applies unchanged. The
LoRA settings of the paper (r 16, alpha 32,
dropout 0.1 on query and value) are the defaults of `model.lora`; `model.lora: null` fine-tunes
every weight. The classifier head stays trainable and is aggregated like every other trainable
parameter.

`roberta_base` with `model.pretrained: true` loads pretrained weights: `model.weights` is a local
folder saved with `save_pretrained` (config.json + model.safetensors), else the Hugging Face
cache entry FacebookAI/roberta-base is used (offline: local files only). Without
`model.pretrained` it is the same architecture (roberta-base's configuration: 12 layers, width
768, vocabulary 50265) with random weights, as swin_base and vit_base are without theirs: for
`--smoke` checks and benchmarks of the paper's shapes on a machine without the weights. `roberta_micro` is a
tiny random RoBERTa (vocabulary 1000) for tests and the `quick` preset.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from torch import Tensor, nn

from fedbench.config import ModelConfig
from fedbench.errors import FedbenchError
from fedbench.models.base import MODELS, PRETRAINED
from fedbench.models.lora import apply_lora

if TYPE_CHECKING:
    from transformers import RobertaConfig, RobertaForSequenceClassification

HF_ROBERTA = "FacebookAI/roberta-base"
TEXT_LORA_TARGETS = ["query", "value"]
PAPER_LORA = {"r": 16, "alpha": 32, "dropout": 0.1, "targets": TEXT_LORA_TARGETS}
MICRO_VOCAB = 1000


class TextClassifier(nn.Module):
    """Token ids -> logits of a Hugging Face sequence classifier; attention mask = (ids != pad)."""

    def __init__(self, model: nn.Module, pad_id: int) -> None:
        super().__init__()
        self.model = model
        self.pad_id = pad_id

    def forward(self, ids: Tensor) -> Tensor:
        return self.model(input_ids=ids, attention_mask=(ids != self.pad_id).long()).logits


def _lora(cfg: ModelConfig, model: nn.Module) -> nn.Module:
    if cfg.lora is None:
        return model
    raw = {**PAPER_LORA, **cfg.lora}
    return apply_lora(model, raw, default_targets=TEXT_LORA_TARGETS, head=["classifier"])


def _check_text(name: str, input_shape: tuple[int, ...]) -> None:
    if len(input_shape) != 1:
        raise FedbenchError(
            f"model {name} needs token-id inputs (glue/<task> data), got {input_shape}"
        )


def _pretrained_roberta(cfg: ModelConfig, num_classes: int) -> RobertaForSequenceClassification:
    from transformers import RobertaForSequenceClassification

    source = Path(cfg.weights).expanduser() if cfg.weights else None
    if source is not None and not source.is_dir():
        raise FedbenchError(
            f"model.weights {source} is not a folder; save roberta-base with "
            "RobertaForSequenceClassification.from_pretrained('FacebookAI/roberta-base')"
            ".save_pretrained(FOLDER) and pass --set model.weights=FOLDER"
        )
    try:
        return RobertaForSequenceClassification.from_pretrained(
            str(source) if source else HF_ROBERTA,
            num_labels=num_classes,
            ignore_mismatched_sizes=True,  # the classifier is new for the task's classes
            local_files_only=source is not None,  # (False: the default, the hub cache)
        )
    except OSError as exc:
        where = source if source else f"the Hugging Face cache ({HF_ROBERTA})"
        raise FedbenchError(
            f"pretrained weights for roberta_base not found in {where} ({type(exc).__name__}); "
            f"download {HF_ROBERTA} (config.json, model.safetensors) with network access into the "
            "Hugging Face cache, or save it to a folder and pass --set model.weights=FOLDER"
        ) from None


PRETRAINED.add("roberta_base")


def roberta_base_config(num_classes: int) -> RobertaConfig:
    """FacebookAI/roberta-base's configuration (its config.json), for random initialisation."""
    from transformers import RobertaConfig

    return RobertaConfig(
        vocab_size=50265,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=514,
        type_vocab_size=1,
        layer_norm_eps=1e-5,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        # transformers 5's config __init__ takes PreTrainedConfig's num_labels through its
        # wrapper; its annotated signature lists the dataclass fields only.
        num_labels=num_classes,  # type: ignore[call-arg]
    )


@MODELS.register("roberta_base")
def roberta_base(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """RoBERTa-Base (HF FacebookAI/roberta-base) + LoRA on query/value; pretrained weights with
    model.pretrained, else random weights of the same architecture."""
    from transformers import RobertaForSequenceClassification

    _check_text("roberta_base", input_shape)
    model: RobertaForSequenceClassification
    if cfg.pretrained:
        model = _pretrained_roberta(cfg, num_classes)
    else:
        model = RobertaForSequenceClassification(roberta_base_config(num_classes))
    if input_shape[0] > model.config.max_position_embeddings - 2:
        raise FedbenchError(f"roberta_base takes at most 512 tokens, got {input_shape[0]}")
    pad_id = model.config.pad_token_id
    if pad_id is None:  # (roberta-base's is 1: only a foreign config.json lacks one)
        raise FedbenchError(f"model.weights {cfg.weights}: its config.json sets no pad_token_id")
    return TextClassifier(_lora(cfg, model), pad_id=pad_id)


@MODELS.register("roberta_micro")
def roberta_micro(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """A tiny random RoBERTa (dim 16, 2 layers, 2 heads, vocabulary 1000) for tests."""
    from transformers import RobertaConfig, RobertaForSequenceClassification

    _check_text("roberta_micro", input_shape)
    config = RobertaConfig(
        vocab_size=MICRO_VOCAB,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=input_shape[0] + 2,
        num_labels=num_classes,  # type: ignore[call-arg]  # (as in roberta_base_config)
        pad_token_id=1,
    )
    model = RobertaForSequenceClassification(config)
    return TextClassifier(_lora(cfg, model), pad_id=1)
