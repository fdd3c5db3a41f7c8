"""LoRA through peft (Hu et al. 2022): `model.lora: {r, alpha, dropout, targets}`.

Adapters are injected in place (`peft.inject_adapter_in_model`), so the model keeps its own
forward and parameter names; afterwards only the LoRA matrices and the classifier head are
trainable. The engine communicates and counts (d) exactly the trainable parameters, so a LoRA
run uploads the adapters and the head and aggregates the head like every other trainable tensor.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError
from torch import nn

from fedbench.config import Strict
from fedbench.errors import FedbenchError


class LoraSettings(Strict):
    r: int = Field(default=16, ge=1)
    alpha: float = Field(default=32.0, gt=0)
    dropout: float = Field(default=0.1, ge=0, lt=1)
    #: Module names (suffixes) that get adapters; None: the model family's default.
    targets: list[str] | None = None


def lora_settings(raw: dict[str, Any]) -> LoraSettings:
    try:
        return LoraSettings.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise FedbenchError(f"model.lora.{where}: {err['msg']}") from None


def apply_lora(
    model: nn.Module, raw: dict[str, Any], *, default_targets: list[str], head: list[str]
) -> nn.Module:
    """Inject LoRA adapters, freeze the base model, keep the head (`head` name prefixes) trainable."""
    from peft import LoraConfig, inject_adapter_in_model

    settings = lora_settings(raw)
    targets = settings.targets or default_targets
    config = LoraConfig(
        r=settings.r,
        # peft annotates an int; a float alpha scales the same (alpha / r) and is what the
        # config accepts.
        lora_alpha=settings.alpha,  # type: ignore[arg-type]
        lora_dropout=settings.dropout,
        target_modules=targets,
        bias="none",
    )
    try:
        model = inject_adapter_in_model(config, model)
    except ValueError as exc:  # no module matched the targets
        raise FedbenchError(
            f"model.lora.targets {targets} match no module of the model ({exc})"
        ) from None
    for name, param in model.named_parameters():
        param.requires_grad = "lora_" in name or any(
            name == h or name.startswith(f"{h}.") for h in head
        )
    return model
