"""Per-sample gradients, clipping and noise (docs/algorithms.md, "Differential privacy")."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedbench.engine.plan import clipping_method
from fedbench.errors import FedbenchError
from fedbench.privacy.mechanism import (
    PrivateGradient,
    check_no_batchnorm,
    chunk_size,
    clip_factors,
    noise_generator,
    poisson_batches,
)


def tiny_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 3, 3, padding=1), nn.GroupNorm(1, 3), nn.ReLU(), nn.Flatten(), nn.Linear(48, 5)
    )


def tiny_batch(b: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(1)
    return torch.randn(b, 1, 4, 4, generator=gen), torch.randint(0, 5, (b,), generator=gen)


def mechanism(model: nn.Module, **kw) -> PrivateGradient:
    params = [p for p in model.parameters() if p.requires_grad]
    # privacy.clipping auto: the plan's method, falling back to vmap where it is not exact
    defaults = {"noise_multiplier": 1.0, "clip": 0.1, "batch_size": 12, "strict": False}
    defaults["method"] = clipping_method(model)
    return PrivateGradient(model, params, **{**defaults, **kw})


def test_per_sample_grads_equal_a_loop_over_single_samples() -> None:
    model = tiny_model()
    x, y = tiny_batch()
    per_sample = mechanism(model).per_sample_grads(x, y)
    for j in range(x.shape[0]):
        loss = nn.functional.cross_entropy(model(x[j : j + 1]), y[j : j + 1])
        ref = torch.autograd.grad(loss, list(model.parameters()))
        for got, want in zip(per_sample, ref, strict=True):
            torch.testing.assert_close(got[j], want, rtol=1e-5, atol=1e-6)


class _Scaled(nn.Module):
    """A linear layer with a frozen parameter, a state buffer and a buffer outside the state
    dict, each entering the forward: every kind of tensor a functional call must be given."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 3)
        self.frozen = nn.Parameter(torch.tensor([1.5, -0.5, 2.0]), requires_grad=False)
        self.register_buffer("shift", torch.tensor([0.25, 0.0, -1.0]))
        self.register_buffer("scale", torch.tensor(0.75), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.frozen * self.scale + self.shift


def test_per_sample_grads_take_the_models_one_split() -> None:
    # vmap's functional call gets the model's tensors through fedbench.step's split (no copy
    # of its own): trainable parameters, state buffers, then frozen parameters and the buffers
    # outside the state dict as constants.
    torch.manual_seed(0)
    model = _Scaled().double()
    x = torch.randn(5, 4, dtype=torch.float64)
    y = torch.tensor([0, 2, 1, 1, 0])
    mech = mechanism(model)
    assert mech.split.names == mech.names == ["linear.weight", "linear.bias"]
    assert mech.split.buffer_names == ["shift"]
    assert sorted(mech.split.constants) == ["frozen", "scale"]
    per_sample = mech.per_sample_grads(x, y)
    for j in range(x.shape[0]):
        loss = nn.functional.cross_entropy(model(x[j : j + 1]), y[j : j + 1])
        ref = torch.autograd.grad(loss, [model.linear.weight, model.linear.bias])
        for got, want in zip(per_sample, ref, strict=True):
            torch.testing.assert_close(got[j], want, rtol=1e-12, atol=1e-14)


def test_every_clipped_per_sample_gradient_has_norm_at_most_clip() -> None:
    model = tiny_model()
    x, y = tiny_batch()
    mech = mechanism(model, clip=0.05)
    grads = mech.per_sample_grads(x, y)
    norms = torch.linalg.vector_norm(torch.cat([g.flatten(1) for g in grads], 1), dim=1)
    assert (norms > 0.05).any(), "the test needs some gradients above the clip"
    factors = clip_factors(norms, 0.05)
    clipped_norms = norms * factors
    assert torch.all(clipped_norms <= 0.05 * (1 + 1e-6))
    # Gradients already below C are untouched.
    small = norms <= 0.05
    torch.testing.assert_close(factors[small], torch.ones_like(factors[small]))
    # clipped_sum is the sum of exactly these clipped gradients.
    expected = [torch.tensordot(factors, g, dims=1) for g in grads]
    for got, want in zip(mech.clipped_sum(x, y), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


def test_chunked_sum_equals_one_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    model = tiny_model()
    x, y = tiny_batch()
    mech = mechanism(model)
    whole = mech.clipped_sum(x, y)
    d = mech.d
    monkeypatch.setattr(
        "fedbench.privacy.mechanism.chunk_size", lambda d_, b: chunk_size(d_, b, 4 * d * 5)
    )
    assert chunk_size(d, 12, 4 * d * 5) == 5
    for got, want in zip(mech.clipped_sum(x, y), whole, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


def test_noise_has_std_sigma_clip_over_batch() -> None:
    model = tiny_model()
    x, y = tiny_batch(12)
    sigma, clip, batch = 1.5, 0.2, 12
    mech = mechanism(model, noise_multiplier=sigma, clip=clip, batch_size=batch)
    clean = torch.cat([g.flatten() for g in mech.clipped_sum(x, y)]) / batch
    gen = noise_generator(torch.device("cpu"), 1234)
    noise = torch.cat(
        [
            torch.cat([g.flatten() for g in mech(x, y, n_local=100, generator=gen)]) - clean
            for _ in range(30)
        ]
    )
    expected = sigma * clip / batch
    assert mech.noise_std(100) == pytest.approx(expected)
    n = noise.numel()  # 30 draws x d coordinates
    assert abs(noise.std().item() / expected - 1) < 4 * (1 / (2 * n) ** 0.5) + 1e-3
    assert abs(noise.mean().item()) < 4 * expected / n**0.5


def test_noise_is_reproducible_from_the_client_key() -> None:
    model = tiny_model()
    x, y = tiny_batch()
    mech = mechanism(model)
    a = mech(x, y, n_local=50, generator=noise_generator(torch.device("cpu"), 7))
    b = mech(x, y, n_local=50, generator=noise_generator(torch.device("cpu"), 7))
    c = mech(x, y, n_local=50, generator=noise_generator(torch.device("cpu"), 8))
    assert all(torch.equal(p, q) for p, q in zip(a, b, strict=True))
    assert not torch.equal(a[0], c[0])


def test_whole_local_set_divides_by_its_size() -> None:
    mech = mechanism(tiny_model(), batch_size=0)
    assert mech.divisor(37) == 37
    assert mech.noise_std(37) == pytest.approx(0.1 / 37)


def test_poisson_batches_include_each_sample_with_rate_q() -> None:
    samples = torch.arange(1000)
    batches = poisson_batches(samples, 50, 0.1, torch.Generator().manual_seed(0))
    sizes = torch.tensor([b.numel() for b in batches], dtype=torch.float64)
    assert len(batches) == 50
    assert abs(sizes.mean().item() - 100) < 4 * (1000 * 0.1 * 0.9 / 50) ** 0.5


def test_batchnorm_models_are_refused() -> None:
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
    with pytest.raises(FedbenchError, match=r"use model.norm gn"):
        check_no_batchnorm(model, "resnet18")
    check_no_batchnorm(tiny_model(), "cnn")  # GroupNorm is fine
