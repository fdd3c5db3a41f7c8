"""DP-FedAdamW (Liu, Miao, Xi, Liu), Figure 3: FedAdamW Figure 2 under differential privacy
(sigma 1, Dir-0.1; the paper trains Swin-Tiny on CIFAR-100): (a) the variance across clients of
DP-LocalAdamW's second moments v, non-IID against IID, and (b) the client drift of DP-LocalAdamW
against (non-private) FedAvg and Local AdamW. The measurements are the engine's
`eval.diagnostics` (fedbench/figures/fedadamw_fig2.py), which private runs report like any other.
The drift claims read `relative_drift` (drift / ||mean Delta||^2): the paper's preset gives
DP-LocalAdamW lr 3e-4 against Local AdamW's 1e-4, about 9x in raw drift from the lr alone.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from pydantic import Field

from fedbench.figures.fedadamw_fig2 import QUICK_BASE, DiagnosticsFigure, DiagnosticsSettings
from fedbench.figures.registry import FIGURES

#: Swin-Tiny (ImageNet-22K) fine-tuned on CIFAR-100, 50 clients at 10%, T 100, K 20, B 16: the
#: DP-FedAdamW paper's transformer federation (its Table 15).
PAPER_BASE: dict[str, Any] = {
    "data": {"name": "cifar100", "image_size": 224},
    "partition": {"clients": 50},
    "model": {"name": "swin_tiny", "pretrained": True},
    "fl": {"rounds": 100, "participation": 0.1, "local_steps": 20, "batch_size": 16},
    "algorithm": {"lr_schedule": "cosine"},
    "eval": {"every": 5, "train_subset": 2000, "diagnostics": True},
    "runtime": {"precision": "bf16"},
}

PRIVACY: dict[str, Any] = {"noise_multiplier": 1.0, "clip": 0.1, "delta": 1.0e-5}


def _methods(clip: float, adamw_lr: float, dp_lr: float) -> dict[str, dict[str, Any]]:
    return {
        "FedAvg": {"algorithm": {"name": "fedavg", "lr": 0.01, "weight_decay": 1.0e-3}},
        "Local AdamW": {"algorithm": {"name": "local_adamw", "lr": adamw_lr, "weight_decay": 0.01}},
        "DP-LocalAdamW": {
            "algorithm": {
                "name": "dp_local_adamw",
                "lr": dp_lr,
                "weight_decay": 0.01,
                "grad_clip": None,
            },
            "privacy": dict(PRIVACY, clip=clip),
        },
    }


class DPFig3Settings(DiagnosticsSettings):
    base: dict[str, Any] = Field(default_factory=lambda: json.loads(json.dumps(PAPER_BASE)))
    # The paper's learning rates: Swin fine-tuning 1e-4 (FedAdamW Table 2), DP-LocalAdamW 3e-4.
    methods: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: _methods(clip=0.1, adamw_lr=1.0e-4, dp_lr=3.0e-4)
    )


@FIGURES.register("dp-fig3")
class DPFig3(DiagnosticsFigure):
    paper = "DP-FedAdamW (Liu, Miao, Xi, Liu), Figure 3"
    title = "Under DP (sigma 1): variance of v across clients and client drift, IID vs Dir-0.1"
    Settings = DPFig3Settings
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        # The tiny ViT of fedadamw-fig2's quick preset; SGD at 0.1, Adam family at 3e-3, and
        # C = 1 (the DP quick tables' clip: at 0.1 the digits signal drowns in the noise).
        "quick": {
            "base": QUICK_BASE,
            "methods": {
                **_methods(clip=1.0, adamw_lr=3.0e-3, dp_lr=3.0e-3),
                "FedAvg": {"algorithm": {"name": "fedavg", "lr": 0.1, "weight_decay": 1.0e-3}},
            },
        }
    }
    comparisons: ClassVar[list[tuple[str, str, tuple[str, str], tuple[str, str]]]] = [
        (
            "v_spread",
            "non-IID data raises the variance of DP-LocalAdamW's second moments across clients",
            ("DP-LocalAdamW", "Dir-0.1"),
            ("DP-LocalAdamW", "IID"),
        ),
        (
            "relative_drift",
            "DP-LocalAdamW drifts more than FedAvg under Dir-0.1 (drift relative to the squared "
            "mean update)",
            ("DP-LocalAdamW", "Dir-0.1"),
            ("FedAvg", "Dir-0.1"),
        ),
        (
            "relative_drift",
            "DP-LocalAdamW drifts more than Local AdamW under Dir-0.1 (drift relative to the "
            "squared mean update: the paper's learning rates, 3e-4 and 1e-4, cancel)",
            ("DP-LocalAdamW", "Dir-0.1"),
            ("Local AdamW", "Dir-0.1"),
        ),
    ]
