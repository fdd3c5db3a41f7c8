"""Ghost clipping (Opacus fast gradient clipping) gives exactly the clipped per-sample sum.

Reference: a Python loop over single examples in float64, each gradient clipped to C by hand."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedbench.engine.plan import clipping_method
from fedbench.errors import FedbenchError
from fedbench.privacy.conv_norms import use_ghost_norm
from fedbench.privacy.mechanism import PrivateGradient, ghost_supported

#: Between the smallest and the largest per-sample norm of each test model.
CLIP = {"conv": 2.0, "tokens": 1.3}


class TokenModel(nn.Module):
    """Embedding -> LayerNorm -> Linear over a sequence -> mean -> head: ghost norms of 3-D Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(20, 6)
        self.norm = nn.LayerNorm(6)
        self.mix = nn.Linear(6, 6)
        self.head = nn.Linear(6, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.tanh(self.mix(self.norm(self.embed(ids)))).mean(1))


def conv_model() -> nn.Module:
    """The first conv materialises its per-sample gradients (16 positions, 3 x 18 weights), the
    second takes the ghost norm (4 positions, 8 x 27 weights): both branches of conv_norms."""
    return nn.Sequential(
        nn.Conv2d(2, 3, 3, padding=1),
        nn.GroupNorm(1, 3),
        nn.ReLU(),
        nn.Conv2d(3, 8, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(32, 4),
    )


def _batch(kind: str, b: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    if kind == "tokens":
        x = torch.randint(0, 20, (b, 5), generator=gen)
    else:
        x = torch.randn(b, 2, 4, 4, generator=gen, dtype=torch.float64)
    return x, torch.randint(0, 4, (b,), generator=gen)


def _loop_reference(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip: float
) -> list[torch.Tensor]:
    params = [p for p in model.parameters() if p.requires_grad]
    total = [torch.zeros_like(p) for p in params]
    clipped = 0
    for j in range(x.shape[0]):
        loss = nn.functional.cross_entropy(model(x[j : j + 1]), y[j : j + 1])
        g = torch.autograd.grad(loss, params)
        norm = torch.sqrt(sum((t**2).sum() for t in g))
        scale = min(1.0, clip / float(norm))
        clipped += scale < 1.0
        for acc, t in zip(total, g, strict=True):
            acc.add_(t, alpha=scale)
    assert 0 < clipped < x.shape[0], "the test needs samples on both sides of the clip"
    return total


@pytest.mark.parametrize("kind", ["conv", "tokens"])
def test_ghost_clipped_sum_equals_a_per_example_loop_in_float64(kind: str) -> None:
    torch.manual_seed(0)
    model = (conv_model() if kind == "conv" else TokenModel()).double()
    if kind == "tokens":  # a frozen layer, as with LoRA: only trainable tensors are clipped
        model.norm.requires_grad_(False)
    x, y = _batch(kind)
    expected = _loop_reference(model, x, y, CLIP[kind])
    params = [p for p in model.parameters() if p.requires_grad]
    mech = PrivateGradient(
        model, params, noise_multiplier=1.0, clip=CLIP[kind], batch_size=10, method="ghost"
    )
    assert mech.method == "ghost"
    for got, want in zip(mech.clipped_sum(x, y), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    # Outside clipped_sum the hooks do nothing: a plain backward matches a hook-free copy.
    assert not mech._ghost.hooks_enabled


@pytest.mark.parametrize("method", ["ghost", "bk"])
def test_clipped_sum_of_a_channels_last_model_equals_the_loop(method: str) -> None:
    # The plan keeps CPU float32 and CUDA convnets in NHWC: the conv norm rules must read an
    # NHWC activation by its shape, not its memory order (Opacus' unfold2d did not).
    torch.manual_seed(0)
    model = conv_model().double()
    x, y = _batch("conv")
    expected = _loop_reference(model, x, y, CLIP["conv"])
    model = model.to(memory_format=torch.channels_last)
    x = x.contiguous(memory_format=torch.channels_last)
    params = list(model.parameters())
    mech = PrivateGradient(
        model, params, noise_multiplier=1.0, clip=CLIP["conv"], batch_size=10, method=method
    )
    for got, want in zip(mech.clipped_sum(x, y), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_ghost_and_vmap_agree() -> None:
    torch.manual_seed(0)
    model = conv_model().double()
    x, y = _batch("conv")
    params = list(model.parameters())
    sums = [
        PrivateGradient(
            model, params, noise_multiplier=1.0, clip=CLIP["conv"], batch_size=10, method=m
        ).clipped_sum(x, y)
        for m in ("vmap", "ghost")
    ]
    for a, b in zip(*sums, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_models_without_an_opacus_rule_use_vmap() -> None:
    class Scale(nn.Module):  # a layer with a trainable tensor Opacus has no rule for
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.w

    model = nn.Sequential(nn.Linear(3, 4), Scale())
    assert ghost_supported(conv_model()) and not ghost_supported(model)
    mech = PrivateGradient(
        model,
        list(model.parameters()),
        noise_multiplier=1.0,
        clip=1.0,
        batch_size=4,
        method=clipping_method(model),
        strict=False,
    )
    assert mech.method == "vmap"


def test_conv_norm_rule_takes_the_cheaper_form() -> None:
    # Bu et al.: Gram matrices 2 L^2 against the gradient's out * in*k*k entries.
    assert not use_ghost_norm(positions=16, out_channels=3, unfolded=18)  # 512 > 54
    assert use_ghost_norm(positions=4, out_channels=8, unfolded=27)  # 32 <= 216


class SequenceFirst(nn.Module):
    """A layer applied sequence-first, (L, B, F): with L == B its ghost norms have the batch's
    length but sum over the wrong dimension, so only the numerical check can catch it."""

    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.Linear(4, 4)
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, L, F)
        return self.head(torch.tanh(self.mix(x.transpose(0, 1))).transpose(0, 1).mean(1))


def _vmap_sum(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip: float) -> list:
    params = [p for p in model.parameters() if p.requires_grad]
    mech = PrivateGradient(
        model, params, noise_multiplier=0.0, clip=clip, batch_size=x.shape[0], method="vmap"
    )
    return mech.clipped_sum(x, y)


def test_ghost_clipping_is_refused_where_a_layer_reshapes_the_batch() -> None:
    """Swin's window attention runs its Linear layers on B x windows rows: ghost clipping's
    per-sample norms would have B x windows entries (the crash of DP tables 3, 10, 11). `auto`
    uses book-keeping clipping there, which takes each sample's windows as its rows
    (tests/privacy/test_book_keeping.py); ghost clipping asked for fails, naming the layer."""
    from fedbench.config import ModelConfig
    from fedbench.models import build_model

    torch.manual_seed(0)
    cfg = ModelConfig(name="swin_micro", lora={"r": 2, "alpha": 4, "dropout": 0.0})
    model = build_model(cfg, (3, 32, 32), 4).double().train()
    params = [p for p in model.parameters() if p.requires_grad]
    assert ghost_supported(model)  # Opacus has a rule for every layer: not enough
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, 32, 32, generator=gen, dtype=torch.float64)
    y = torch.randint(0, 4, (4,), generator=gen)
    with pytest.raises(FedbenchError, match="ghost clipping is not exact for this model") as err:
        PrivateGradient(
            model, params, noise_multiplier=0.0, clip=0.05, batch_size=4, method="ghost"
        ).clipped_sum(x, y)
    assert "reshapes the batch" in str(err.value) and "attn" in str(err.value)


def test_norms_of_the_right_length_but_wrong_values_fall_back_to_vmap() -> None:
    torch.manual_seed(0)
    model = SequenceFirst().double()
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(3, 3, 4, generator=gen, dtype=torch.float64)  # B = L = 3
    y = torch.randint(0, 3, (3,), generator=gen)
    params = list(model.parameters())
    mech = PrivateGradient(
        model,
        params,
        noise_multiplier=0.0,
        clip=0.1,
        batch_size=3,
        method=clipping_method(model),
        strict=False,
    )
    assert mech.method == "bk"
    got = mech.clipped_sum(x, y)
    assert mech.method == "vmap" and "differ from the exact ones" in (mech.fallback or "")
    for a, b in zip(got, _vmap_sum(model, x, y, 0.1), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    with pytest.raises(FedbenchError, match="ghost clipping is not exact for this model"):
        PrivateGradient(
            model, params, noise_multiplier=0.0, clip=0.1, batch_size=3, method="ghost"
        ).clipped_sum(x, y)


def test_an_exact_model_keeps_ghost_clipping_after_the_check() -> None:
    torch.manual_seed(0)
    model = conv_model().double()
    x, y = _batch("conv")
    mech = PrivateGradient(
        model,
        list(model.parameters()),
        noise_multiplier=1.0,
        clip=CLIP["conv"],
        batch_size=10,
        method="ghost",
    )
    mech.clipped_sum(x, y)
    assert mech.method == "ghost" and mech.fallback is None and mech.checked_sizes == {10}


def test_vmap_under_bf16_falls_back_to_float32_where_its_backward_mixes_dtypes() -> None:
    """Swin's backward under vmap and bf16 autocast has no mixed-dtype batching rule (DP-FedAdamW
    Figure 3's DP-LocalAdamW cell at paper settings crashed): float32, the same sum as without
    autocast, and a note."""
    from fedbench.config import ModelConfig
    from fedbench.models import build_model

    torch.manual_seed(0)
    model = build_model(ModelConfig(name="swin_micro"), (3, 32, 32), 4).train()
    params = [p for p in model.parameters() if p.requires_grad]
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(2, 3, 32, 32, generator=gen), torch.randint(0, 4, (2,), generator=gen)
    sums = []
    for cast in (torch.bfloat16, None):
        mech = PrivateGradient(
            model, params, noise_multiplier=0.0, clip=0.1, batch_size=2, autocast=cast,
            method="vmap",
        )  # fmt: skip
        torch.manual_seed(1)  # the same drop-path draws
        sums.append(mech.clipped_sum(x, y))
        if cast is not None:
            assert mech.autocast is None and "float32" in (mech.fallback or "")
    for a, b in zip(*sums, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
