"""Book-keeping (bk) clipping (Bu et al. 2023) gives exactly the clipped per-sample sum: against
vmap's clipped sum (or, where vmap cannot trace the model, a per-example loop) in float64 at
1e-12, on a conv + GroupNorm net, LoRA transformers and a sequence model; and the rule of `auto`.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedbench.config import ModelConfig
from fedbench.engine.plan import clipping_method
from fedbench.errors import FedbenchError
from fedbench.models import build_model
from fedbench.privacy import book_keeping
from fedbench.privacy.book_keeping import (
    KEEP_BYTES,
    bk_problem,
    bk_supported,
    conv_per_sample_grads,
    ghost_squared_norms,
    weight_rules,
)
from fedbench.privacy.mechanism import PrivateGradient, ghost_supported

LORA = {"r": 2, "alpha": 4, "dropout": 0.0}


def conv_gn_model() -> nn.Module:
    """Conv2d layers with bias, stride, dilation, GroupNorm and a Linear head."""
    return nn.Sequential(
        nn.Conv2d(2, 3, 3, padding=1),
        nn.GroupNorm(1, 3),
        nn.ReLU(inplace=True),  # in place on the GroupNorm's output: its gradient edge is kept
        nn.Conv2d(3, 8, 3, stride=2, padding=1),
        nn.GroupNorm(2, 8),
        nn.Tanh(),
        nn.Conv2d(8, 8, 3, padding=2, dilation=2, bias=False),
        nn.Flatten(),
        nn.Linear(32, 4),
    )


class SequenceModel(nn.Module):
    """Embedding (with a padding row) -> LayerNorm -> Linear over a sequence -> Linear over the
    sequence -> mean -> head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(12, 8, padding_idx=0)
        self.norm = nn.LayerNorm(8)
        self.up = nn.Linear(8, 16)
        self.down = nn.Linear(16, 3)
        self.head = nn.Linear(3, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.up(self.norm(self.embed(ids))))
        return self.head(torch.tanh(self.down(h)).mean(1))


def _images(b: int = 10, shape: tuple[int, ...] = (2, 4, 4)) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(b, *shape, generator=gen, dtype=torch.float64)
    return x, torch.randint(0, 4, (b,), generator=gen)


def _tokens(b: int = 10, length: int = 5, vocab: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    x = torch.randint(0, vocab, (b, length), generator=gen)  # 0 is the padding id
    x[:, 0] = 0  # repeated tokens and padding in every sample
    x[:, 1] = x[:, 2]
    return x, torch.randint(0, 4, (b,), generator=gen)


def _sum(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    clip: float,
    method: str,
    rule: str | None = None,
) -> list:
    params = [p for p in model.parameters() if p.requires_grad]
    mech = PrivateGradient(
        model, params, noise_multiplier=0.0, clip=clip, batch_size=x.shape[0], method=method
    )  # type: ignore[arg-type]
    if mech._bk is not None and rule is not None:
        mech._bk.rule = rule  # type: ignore[assignment]
        mech._bk.keep_bytes = 0  # "norm": one sample at a time
    out = mech.clipped_sum(x, y)
    assert mech.method == method and mech.fallback is None
    mech.close()
    return out


def _median_norm(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """A clip with samples on both sides: the median per-sample gradient norm (a loop)."""
    params = [p for p in model.parameters() if p.requires_grad]
    norms = []
    for j in range(x.shape[0]):
        loss = nn.functional.cross_entropy(model(x[j : j + 1]), y[j : j + 1])
        g = torch.autograd.grad(loss, params, materialize_grads=True)
        norms.append(float(torch.sqrt(sum((t**2).sum() for t in g))))
    return float(torch.tensor(norms).median())


def _loop(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip: float) -> list:
    """sum_j clip(g_j) by one backward pass per sample; asserts both sides of the clip."""
    params = [p for p in model.parameters() if p.requires_grad]
    total = [torch.zeros_like(p) for p in params]
    clipped = 0
    for j in range(x.shape[0]):
        loss = nn.functional.cross_entropy(model(x[j : j + 1]), y[j : j + 1])
        g = torch.autograd.grad(loss, params, materialize_grads=True)
        scale = min(1.0, clip / float(torch.sqrt(sum((t**2).sum() for t in g))))
        clipped += scale < 1.0
        for acc, t in zip(total, g, strict=True):
            acc.add_(t, alpha=scale)
    assert 0 < clipped < x.shape[0], "the test needs samples on both sides of the clip"
    return total


def _assert_equal(got: list, want: list) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == torch.float64 and a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


#: The rules `weight_rules` picks, or one rule for every Linear and Conv2d weight.
RULES = pytest.mark.parametrize("rule", [None, "keep", "ghost", "norm"])


@RULES
@pytest.mark.parametrize("grouped", [False, True], ids=["im2col", "grouped-conv"])
def test_bk_equals_vmap_on_a_conv_groupnorm_net_in_float64(
    rule: str | None, grouped: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per-sample conv gradients by im2col + bmm or by a grouped convolution's weight gradient
    (book_keeping.GROUPED_POSITIONS), under each rule."""
    monkeypatch.setattr(book_keeping, "GROUPED_POSITIONS", 1 if grouped else 10**9)
    torch.manual_seed(0)
    model = conv_gn_model().double()
    x, y = _images()
    clip = _median_norm(model, x, y)
    _assert_equal(_sum(model, x, y, clip, "bk", rule), _sum(model, x, y, clip, "vmap"))
    _assert_equal(_sum(model, x, y, clip, "bk", rule), _loop(model, x, y, clip))


@RULES
def test_bk_equals_vmap_on_a_sequence_model_with_a_frozen_layer_in_float64(
    rule: str | None,
) -> None:
    torch.manual_seed(0)
    model = SequenceModel().double()
    x, y = _tokens()
    clip = _median_norm(model, x, y)
    _assert_equal(_sum(model, x, y, clip, "bk", rule), _sum(model, x, y, clip, "vmap"))
    _assert_equal(_sum(model, x, y, clip, "bk", rule), _loop(model, x, y, clip))
    model.norm.requires_grad_(False)  # as with LoRA: only trainable tensors are clipped
    clip = _median_norm(model, x, y)
    _assert_equal(_sum(model, x, y, clip, "bk", rule), _sum(model, x, y, clip, "vmap"))


@RULES
def test_bk_equals_vmap_on_a_lora_vision_transformer_in_float64(rule: str | None) -> None:
    torch.manual_seed(0)
    model = build_model(ModelConfig(name="vit_micro", lora=LORA), (3, 32, 32), 4).double().eval()
    x, y = _images(6, (3, 32, 32))
    with torch.no_grad():  # LoRA's B starts at zero: give the adapters a gradient of their own
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert any("lora_A" in n for n in names) and any("head" in n for n in names)
    clip = _median_norm(model, x, y)
    _assert_equal(_sum(model, x, y, clip, "bk", rule), _sum(model, x, y, clip, "vmap"))
    _assert_equal(_sum(model, x, y, clip, "bk", rule), _loop(model, x, y, clip))


def test_bk_equals_a_per_example_loop_on_lora_roberta_in_float64() -> None:
    """vmap cannot trace Hugging Face's attention mask: the reference is a loop."""
    torch.manual_seed(0)
    model = build_model(ModelConfig(name="roberta_micro", lora=LORA), (16,), 4).double().eval()
    gen = torch.Generator().manual_seed(3)
    x = torch.randint(2, 100, (6, 16), generator=gen)
    y = torch.randint(0, 4, (6,), generator=gen)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    mech = PrivateGradient(
        model,
        [p for p in model.parameters() if p.requires_grad],
        noise_multiplier=0.0,
        clip=_median_norm(model, x, y),
        batch_size=6,
        method=clipping_method(model),
        strict=False,
    )
    assert mech.method == "bk"
    _assert_equal(mech.clipped_sum(x, y), _loop(model, x, y, mech.clip))
    assert mech.method == "bk" and mech.fallback is None


def test_a_layer_that_does_not_reach_the_loss_gets_zero_gradients() -> None:
    class Unused(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.used = nn.Linear(3, 4)
            self.side = nn.Linear(3, 2)  # runs, but its output is dropped
            self.never = nn.Linear(3, 2)  # never runs

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.side(x)
            return self.used(x)

    torch.manual_seed(0)
    model = Unused().double()
    x, y = _images(8, (3,))
    clip = _median_norm(model, x, y)
    got = _sum(model, x, y, clip, "bk")
    _assert_equal(got, _sum(model, x, y, clip, "vmap"))
    assert all(float(g.abs().max()) == 0 for g in got[2:])


def test_bk_keeps_the_method_after_the_check_and_its_hooks_stay_idle() -> None:
    torch.manual_seed(0)
    model = conv_gn_model().double()
    x, y = _images()
    mech = PrivateGradient(
        model,
        list(model.parameters()),
        noise_multiplier=1.0,
        clip=2.0,
        batch_size=10,
        method=clipping_method(model),
        strict=False,
    )
    assert mech.method == "bk"
    mech.clipped_sum(x, y)
    assert mech.method == "bk" and mech.fallback is None and mech.checked_sizes == {10}
    assert mech._bk is not None and not mech._bk._records  # nothing kept between steps
    # Outside clipped_sum the hooks record nothing: a plain backward works as without them.
    model(x).sum().backward()
    assert not mech._bk._records
    assert mech.clipped_sum(x[:0], y[:0])[0].abs().max() == 0  # an empty Poisson batch
    mech.close()
    assert not any(m._forward_hooks for m in model.modules())


def test_bk_equals_vmap_on_a_lora_swin_whose_windows_are_rows_of_each_sample() -> None:
    """Swin's window attention runs its Linear layers on B x windows rows, sample-major: bk
    takes each sample's windows as its rows (ghost clipping falls back to vmap there)."""
    torch.manual_seed(0)
    model = build_model(ModelConfig(name="swin_micro", lora=LORA), (3, 32, 32), 4).double()
    model.train()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    x, y = _images(4, (3, 32, 32))
    clip = _median_norm(model.eval(), x, y)
    model.train()  # drop-path on, except in the first batch's check
    params = [p for p in model.parameters() if p.requires_grad]
    mech = PrivateGradient(
        model,
        params,
        noise_multiplier=0.0,
        clip=clip,
        batch_size=4,
        method=clipping_method(model),
        strict=False,
    )
    assert mech.method == "bk"
    torch.manual_seed(1)  # the same drop-path draws in both sums
    got = mech.clipped_sum(x, y)
    assert mech.method == "bk" and mech.fallback is None
    mech.close()
    torch.manual_seed(1)
    _assert_equal(got, _sum(model, x, y, clip, "vmap"))


class Regroup(nn.Module):
    """A layer on the batch's tokens as rows, less the first: B x L - 1 rows, not a multiple of
    B (and not one sample's rows after another)."""

    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, L, 4)
        rows = torch.tanh(self.mix(x.flatten(0, 1)[1:]))
        mixed = torch.cat([x.flatten(0, 1)[:1], rows]).reshape(x.shape)
        return self.head(mixed.mean(1))


def test_a_layer_that_mixes_samples_falls_back_to_vmap_or_fails_when_asked_for() -> None:
    torch.manual_seed(0)
    model = Regroup().double()
    x, y = _images(2, (3, 4))
    y = y % 2
    params = list(model.parameters())
    mech = PrivateGradient(
        model,
        params,
        noise_multiplier=0.0,
        clip=0.1,
        batch_size=2,
        method=clipping_method(model),
        strict=False,
    )
    assert mech.method == "bk"  # chosen, not yet checked
    got = mech.clipped_sum(x, y)
    assert mech.method == "vmap" and mech._bk is None
    assert "book-keeping" in (mech.fallback or "") and "reshapes the batch" in mech.fallback
    assert "layer mix sees 5 rows for a batch of 2" in mech.fallback  # names the layer
    assert not any(m._forward_hooks for m in model.modules())  # hooks detached
    _assert_equal(got, _sum(model, x, y, 0.1, "vmap"))
    with pytest.raises(FedbenchError, match="book-keeping clipping is not exact for this model"):
        PrivateGradient(
            model, params, noise_multiplier=0.0, clip=0.1, batch_size=2, method="bk"
        ).clipped_sum(x, y)


class SequenceFirst(nn.Module):
    """A layer applied sequence-first (L, B, F): with L == B (or L a multiple of B) its rows have
    the batch's count (or a multiple of it) but are not its samples, so only the numerical check
    catches it."""

    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.Linear(4, 4)
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, L, F)
        return self.head(torch.tanh(self.mix(x.transpose(0, 1))).transpose(0, 1).mean(1))


class Twice(nn.Module):
    """One Linear layer run twice per forward (its per-sample gradient has two terms)."""

    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.Linear(3, 3)
        self.head = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.mix(torch.tanh(self.mix(x))))


class Tied(nn.Module):
    """The head reuses the embedding's weight outside the Embedding module."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(6, 4)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(torch.tanh(self.embed(ids).mean(1)), self.embed.weight)


@pytest.mark.parametrize(
    ("model", "batch", "why"),
    [
        (SequenceFirst, lambda: _images(3, (3, 4)), "differ"),
        (SequenceFirst, lambda: _images(2, (4, 4)), "differ"),  # 4 rows for a batch of 2
        (Twice, lambda: _images(4, (3,)), "runs 2 times in one forward pass"),
        (Tied, lambda: _tokens(4, 3, vocab=6), "differ"),
    ],
)
def test_models_that_break_bk_fall_back_to_vmap_exactly(model, batch, why: str) -> None:
    torch.manual_seed(0)
    model = model().double()
    x, y = batch()
    y = y % 2
    params = list(model.parameters())
    mech = PrivateGradient(
        model,
        params,
        noise_multiplier=0.0,
        clip=0.1,
        batch_size=x.shape[0],
        method=clipping_method(model),
        strict=False,
    )
    assert mech.method == "bk"
    got = mech.clipped_sum(x, y)
    assert mech.method == "vmap" and why in (mech.fallback or ""), mech.fallback
    _assert_equal(got, _sum(model, x, y, 0.1, "vmap"))


def test_bk_under_bf16_autocast_is_as_close_to_float32_as_vmap_under_bf16() -> None:
    """bf16 rounding moves the first conv's small gradients by ~12% in both methods."""
    torch.manual_seed(0)
    model = conv_gn_model()
    x, y = _images()
    x = x.float()
    params = list(model.parameters())
    sums = {}
    for method, cast in (("bk", torch.bfloat16), ("vmap", torch.bfloat16), ("vmap", None)):
        mech = PrivateGradient(
            model, params, noise_multiplier=0.0, clip=0.5, batch_size=10, autocast=cast,
            method=method,  # type: ignore[arg-type]
        )  # fmt: skip
        sums[method, cast] = mech.clipped_sum(x, y)
        assert mech.method == method and mech.fallback is None
        mech.close()
    exact = sums["vmap", None]
    for bk, vmap, want in zip(sums["bk", torch.bfloat16], sums["vmap", torch.bfloat16], exact):
        assert bk.dtype == torch.float32
        error = float((bk - want).norm())
        assert error <= 1.5 * float((vmap - want).norm()) + 0.01 * float(want.norm())


class Scale(nn.Module):
    """A layer with a trainable tensor that neither bk nor Opacus has a rule for."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.w


def test_auto_rule_bk_where_every_trainable_layer_has_a_rule_else_ghost_else_vmap() -> None:
    """The rule, with the measurements behind it in fedbench.privacy.mechanism's docstring."""
    resnet = build_model(ModelConfig(name="resnet18", norm="gn"), (3, 16, 16), 10)
    vit = build_model(ModelConfig(name="vit_micro", lora=LORA), (3, 32, 32), 4)
    assert clipping_method(resnet) == "bk" and clipping_method(vit) == "bk"
    assert clipping_method(SequenceModel()) == "bk"
    conv1d = nn.Sequential(nn.Conv1d(2, 3, 3), nn.Flatten(), nn.Linear(6, 2))  # Opacus only
    assert not bk_supported(conv1d) and ghost_supported(conv1d)
    assert clipping_method(conv1d) == "ghost"
    assert "Conv1d" in (bk_problem(conv1d) or "")
    scale = nn.Sequential(nn.Linear(3, 4), Scale())
    assert clipping_method(scale) == "vmap"
    grouped = nn.Sequential(nn.Conv2d(2, 4, 3, groups=2))
    assert "groups" in (bk_problem(grouped) or "")
    frozen = nn.Sequential(nn.Linear(3, 4), Scale())
    frozen[1].requires_grad_(False)  # frozen layers need no rule
    assert clipping_method(frozen) == "bk"
    with pytest.raises(FedbenchError, match="book-keeping clipping cannot run this model"):
        PrivateGradient(
            scale, list(scale.parameters()), noise_multiplier=1.0, clip=1.0, batch_size=4,
            method="bk",
        )  # fmt: skip


def test_the_per_layer_rule_takes_the_cheaper_form() -> None:
    # Per sample: Gram matrices T^2 (out + in) against materialised entries T out in + 128 out in.
    # No budget to keep per-sample gradients: each weight takes "ghost" or "norm".
    shapes = [(1, 1024, 64, 576), (1, 16, 512, 4608), (1, 5, 3, 16)]  # ResNet layer1, layer4
    assert weight_rules(shapes, budget_bytes=0) == ["norm", "ghost", "ghost"]


def test_weight_rules_keep_where_cheapest_and_within_the_budget() -> None:
    # ResNet-18 GN at 32x32: the 64-channel convs (1024 positions) keep their per-sample
    # gradients, the 512-channel ones (16 positions) take the ghost norm; a tiny head too.
    shapes = [(10, 1, 4, 4), (10, 1024, 64, 576), (10, 16, 512, 4608), (10, 64, 8, 8)]
    assert weight_rules(shapes, budget_bytes=KEEP_BYTES) == ["ghost", "keep", "ghost", "keep"]
    # No memory: the materialised norm where the Gram matrices cost more.
    assert weight_rules(shapes, budget_bytes=0) == ["ghost", "norm", "ghost", "norm"]
    # Memory for one: the layer that saves the most operations per byte (1024 positions).
    one = 10 * 64 * 576 * 4
    assert weight_rules(shapes, budget_bytes=one) == ["ghost", "keep", "ghost", "norm"]


def test_the_ghost_norm_is_the_squared_norm_of_each_materialised_gradient_in_float64() -> None:
    # One formula for the Linear (B, T, in) layout and, transposed, a Conv2d's unfolded input:
    # <a_j a_j^T, g_j g_j^T> = ||g_j^T a_j||^2.
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(4, 5, 7, generator=gen, dtype=torch.float64)
    g = torch.randn(4, 5, 3, generator=gen, dtype=torch.float64)
    want = torch.bmm(g.transpose(1, 2), a).flatten(1).square().sum(1)
    torch.testing.assert_close(ghost_squared_norms(a, g), want, rtol=1e-12, atol=0)
    conv = nn.Conv2d(2, 3, 3, padding=1).double()
    x = torch.randn(4, 2, 5, 5, generator=gen, dtype=torch.float64)
    out_grad = torch.randn(4, 3, 5, 5, generator=gen, dtype=torch.float64)
    unfolded = nn.functional.unfold(x, 3, padding=1)  # (B, in*k*k, L)
    got = ghost_squared_norms(unfolded.mT, out_grad.flatten(2).mT)
    want = conv_per_sample_grads(conv, x, out_grad).flatten(1).square().sum(1)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=0)
