"""Model builders, created by name through MODELS."""

from fedbench.models import hf_text, leaf, resnet, small, timm_models, vit  # noqa: F401  (registration)
from fedbench.models.base import MODELS, build_model, count_trainable

__all__ = ["MODELS", "build_model", "count_trainable"]
