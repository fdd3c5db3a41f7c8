"""Pretrained vision transformers through timm: Swin-Tiny, Swin-Base, ViT-Base (FedAdamW Table 2,
DP-FedAdamW Tables 2-11), and tiny random members of the same families for tests.

Every layer is trained and the classifier is replaced for the dataset's classes. With
`model.pretrained: true` the ImageNet-22K weights come from `model.weights` (a local
.safetensors/.pth/.bin state dict, the head dropped) or from timm's Hugging Face cache
(HF_HUB_OFFLINE is honoured); when neither is there the run stops with one line naming the file
and where to put it. `model.lora` injects LoRA adapters (default targets attn.qkv and attn.proj)
and then trains only the adapters and the head.

`swin_micro` and `vit_micro` are the same timm classes with tiny widths and depths (random
initialisation, no weights): they exist so that tests and `quick` presets run in seconds on a CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from torch import nn

from fedbench.config import ModelConfig
from fedbench.errors import FedbenchError
from fedbench.models.base import MODELS, PRETRAINED, image_input
from fedbench.models.lora import apply_lora

VISION_LORA_TARGETS = ["attn.qkv", "attn.proj"]


@dataclass(frozen=True)
class TimmSpec:
    arch: str
    #: timm pretrained tag of the paper's weights (ImageNet-22K) and the file it ships as.
    tag: str | None
    file: str | None
    family: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: Image side the architecture needs; None: the data's side (tiny models adapt to it).
    fixed_size: int | None = 224


SPECS = {
    "swin_tiny": TimmSpec(
        "swin_tiny_patch4_window7_224",
        "ms_in22k",
        "swin_tiny_patch4_window7_224_22k.pth",
        "swin",
        {"drop_path_rate": 0.1},
    ),
    "swin_base": TimmSpec(
        "swin_base_patch4_window7_224",
        "ms_in22k",
        "swin_base_patch4_window7_224_22k.pth",
        "swin",
        {"drop_path_rate": 0.1},
    ),
    "vit_base": TimmSpec(
        "vit_base_patch16_224",
        "augreg_in21k",
        "model.safetensors of hf.co/timm/vit_base_patch16_224.augreg_in21k",
        "vit",
    ),
    "swin_micro": TimmSpec(
        "swin_tiny_patch4_window7_224",
        None,
        None,
        "swin",
        {"embed_dim": 16, "depths": (1, 1), "num_heads": (1, 2), "window_size": 4},
        fixed_size=None,
    ),
    "vit_micro": TimmSpec(
        "vit_base_patch16_224",
        None,
        None,
        "vit",
        {"patch_size": 8, "embed_dim": 32, "depth": 2, "num_heads": 2},
        fixed_size=None,
    ),
}


def _filter_fn(family: str) -> Callable[..., dict[str, Any]]:
    from timm.models import swin_transformer, vision_transformer

    family_module = swin_transformer if family == "swin" else vision_transformer
    return family_module.checkpoint_filter_fn


def _missing_weights(name: str, spec: TimmSpec, reason: str) -> FedbenchError:
    return FedbenchError(
        f"pretrained weights for {name} not found ({reason}); download {spec.file} "
        f"(timm: {spec.arch}.{spec.tag}) on a machine with network access and pass it with "
        f"--set model.weights=PATH, or put timm/{spec.arch}.{spec.tag} in the Hugging Face cache "
        "(~/.cache/huggingface/hub, or $HF_HOME)"
    )


def _load_file(model: nn.Module, path: Path, spec: TimmSpec) -> None:
    """Load a local state dict into `model`, dropping the classifier (the head is new)."""
    from timm.models import load_state_dict

    try:
        state = load_state_dict(str(path))
    except Exception as exc:  # corrupted or unknown format
        raise FedbenchError(
            f"model.weights {path} could not be read as a state dict ({exc})"
        ) from None
    state = _filter_fn(spec.family)(state, model)
    head = cast(Any, model).pretrained_cfg.get("classifier") or "head"  # a timm model's
    state = {k: v for k, v in state.items() if not (k == head or k.startswith(f"{head}."))}
    missing, _ = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.startswith(f"{head}.")]
    if missing:
        raise FedbenchError(
            f"model.weights {path} does not fit {spec.arch}: {len(missing)} parameters missing "
            f"(first: {missing[0]}); use the {spec.file} checkpoint"
        )


def _image_shape(name: str, spec: TimmSpec, input_shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(C, H, W) of square images of a size the model takes; anything else is a FedbenchError."""
    c, h, w = image_input(name, input_shape)
    if h != w:
        raise FedbenchError(f"model {name} needs square images, got {h}x{w}; set data.image_size")
    if spec.fixed_size is not None and h != spec.fixed_size:
        raise FedbenchError(
            f"model {name} takes {spec.fixed_size}x{spec.fixed_size} images, got {h}x{w}; "
            f"set data.image_size={spec.fixed_size}"
        )
    return c, h, w


def build_timm(
    name: str, cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int
) -> nn.Module:
    import timm

    spec = SPECS[name]
    c, h, w = _image_shape(name, spec, input_shape)
    kwargs = dict(spec.kwargs, num_classes=num_classes, in_chans=c, img_size=h)
    try:
        if cfg.pretrained and not cfg.weights:
            try:
                model = timm.create_model(f"{spec.arch}.{spec.tag}", pretrained=True, **kwargs)
            except Exception as exc:  # offline and not cached (LocalEntryNotFoundError, OSError)
                raise _missing_weights(name, spec, type(exc).__name__) from None
        else:
            model = timm.create_model(spec.arch, pretrained=False, **kwargs)
    except (AssertionError, ValueError, RuntimeError) as exc:
        raise FedbenchError(f"model {name} cannot take {c}x{h}x{w} inputs ({exc})") from None
    if cfg.pretrained and cfg.weights:
        path = Path(cfg.weights).expanduser()
        if not path.is_file():
            raise _missing_weights(name, spec, f"model.weights {path} does not exist")
        _load_file(model, path, spec)
    if cfg.lora is not None:
        model = apply_lora(model, cfg.lora, default_targets=VISION_LORA_TARGETS, head=["head"])
    return model


def _register(name: str) -> None:
    def builder(cfg: ModelConfig, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        return build_timm(name, cfg, input_shape, num_classes)

    builder.__doc__ = f"timm {SPECS[name].arch}" + (
        f" ({SPECS[name].tag} weights with model.pretrained)"
        if SPECS[name].tag
        else " (tiny, tests)"
    )
    MODELS.register(name)(builder)
    if SPECS[name].tag is not None:
        PRETRAINED.add(name)


for _name in SPECS:
    _register(_name)
