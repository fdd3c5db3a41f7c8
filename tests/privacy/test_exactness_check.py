"""The exactness check of bk and ghost clipping sees the batches the step clips: it waits for a
batch of two or more samples (a batch of one cannot show how a layer orders the rows of several
samples), runs again at every new batch size, and a run whose batches all held one sample says
so. Ghost clipping runs models with in-place activations after its hooked layers. Every sum is
compared with one backward pass per sample in float64."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from fedbench.engine.plan import clipping_method
from fedbench.errors import FedbenchError
from fedbench.privacy.mechanism import PrivateGradient, checked_samples
from tests.conftest import TINY


class WindowMajor(nn.Module):
    """A Linear on k rows per sample laid out window-major (every sample's first window, then
    every sample's second, ...): k x B rows, which bk takes as k rows of each sample in turn.
    With `sample_major_up_to`, batches up to that size are laid out sample-major (exact for bk),
    larger ones window-major: the layout changes with the batch size."""

    def __init__(self, k: int = 3, d: int = 4, sample_major_up_to: int = 0) -> None:
        super().__init__()
        self.k, self.d, self.sample_major_up_to = k, d, sample_major_up_to
        self.mix = nn.Linear(d, d)
        self.head = nn.Linear(k * d, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, k * d)
        b = x.shape[0]
        windows = x.reshape(b, self.k, self.d)
        if b <= self.sample_major_up_to:
            h = torch.tanh(self.mix(windows.reshape(b * self.k, self.d)))
            return self.head(h.reshape(b, -1))
        rows = windows.transpose(0, 1).reshape(self.k * b, self.d)
        h = torch.tanh(self.mix(rows)).reshape(self.k, b, self.d).transpose(0, 1)
        return self.head(h.reshape(b, -1))


class Conv1dNet(nn.Module):
    """Conv1d (no bk rule: auto picks ghost) and Linear layers, each followed by an in-place
    ReLU on its output; `functional` applies the first one in the forward code instead."""

    def __init__(self, functional: bool = False) -> None:
        super().__init__()
        self.functional = functional
        self.conv = nn.Conv1d(2, 4, 3)
        self.act = nn.ReLU(inplace=True)
        self.hidden = nn.Linear(24, 8)
        self.act2 = nn.ReLU(inplace=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, 2, 8)
        h = self.conv(x)
        h = nn.functional.relu(h, inplace=True) if self.functional else self.act(h)
        return self.head(self.act2(self.hidden(h.flatten(1))))


def _batch(b: int, shape: tuple[int, ...], seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(b, *shape, generator=gen, dtype=torch.float64)
    return x, torch.randint(0, 2, (b,), generator=gen)


def _per_sample(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> list[list[torch.Tensor]]:
    params = [p for p in model.parameters() if p.requires_grad]
    grads = []
    for j in range(x.shape[0]):
        loss = nn.functional.cross_entropy(model(x[j : j + 1]), y[j : j + 1])
        grads.append(list(torch.autograd.grad(loss, params, materialize_grads=True)))
    return grads


def _norm(grads: list[torch.Tensor]) -> float:
    return float(torch.sqrt(sum((g**2).sum() for g in grads)))


def _loop(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip: float) -> list[torch.Tensor]:
    """sum_j clip(g_j) by one backward pass per sample."""
    total = [torch.zeros_like(p) for p in model.parameters() if p.requires_grad]
    for sample in _per_sample(model, x, y):
        scale = min(1.0, clip / _norm(sample))
        for acc, g in zip(total, sample, strict=True):
            acc.add_(g, alpha=scale)
    return total


def _median_clip(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """A clip with samples on both sides of it."""
    norms = sorted(_norm(g) for g in _per_sample(model, x, y))
    return norms[len(norms) // 2]


def _assert_equal(got: list[torch.Tensor], want: list[torch.Tensor]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == torch.float64
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def _mechanism(model: nn.Module, clip: float, method: str = "auto") -> PrivateGradient:
    """`auto`: the plan's method, falling back to vmap where it is not exact (a run's auto)."""
    params = [p for p in model.parameters() if p.requires_grad]
    strict = method != "auto"
    chosen = clipping_method(model) if method == "auto" else method
    return PrivateGradient(
        model, params, noise_multiplier=0.0, clip=clip, batch_size=8, method=chosen, strict=strict
    )  # type: ignore[arg-type]


def test_the_checked_samples_are_the_first_middle_and_last() -> None:
    assert checked_samples(1) == [0]
    assert checked_samples(2) == [0, 1]
    assert checked_samples(8) == [0, 4, 7]


def test_a_window_major_layer_first_met_at_one_sample_is_caught_at_the_next_batch() -> None:
    """Today's first-batch check passed it at one sample, and bk clipped every later batch
    wrongly: now the batch of 8 is checked and clipped by vmap, exactly."""
    torch.manual_seed(0)
    model = WindowMajor().double()
    x, y = _batch(9, (12,))
    clip = _median_clip(model, x[1:], y[1:])
    mech = _mechanism(model, clip)
    assert mech.method == "bk"
    _assert_equal(mech.clipped_sum(x[:1], y[:1]), _loop(model, x[:1], y[:1], clip))
    assert mech.method == "bk"  # one sample: exact, whatever the order of its rows
    assert mech.checked_sizes == {1} and "one sample only" in (mech.note() or "")
    _assert_equal(mech.clipped_sum(x[1:], y[1:]), _loop(model, x[1:], y[1:], clip))
    assert mech.method == "vmap"
    assert "book-keeping clipping is not exact" in (mech.fallback or "")
    assert "at a batch of 8" in (mech.fallback or "")
    assert mech.unchecked_note() is None
    # Asked for explicitly: one line at the batch of 8, after the batch of 1 passed.
    strict = _mechanism(model, clip, "bk")
    strict.clipped_sum(x[:1], y[:1])
    with pytest.raises(FedbenchError, match="not exact for this model: at a batch of 8") as err:
        strict.clipped_sum(x[1:], y[1:])
    assert "\n" not in str(err.value)


def test_the_check_runs_again_when_the_batch_size_changes() -> None:
    """Sample-major rows up to 2 samples, window-major above: the batch of 2 passes, the batch
    of 4 is checked (it was not, after the first batch) and falls back to vmap."""
    torch.manual_seed(0)
    model = WindowMajor(sample_major_up_to=2).double()
    x, y = _batch(6, (12,))
    clip = _median_clip(model, x[2:], y[2:])
    mech = _mechanism(model, clip)
    _assert_equal(mech.clipped_sum(x[:2], y[:2]), _loop(model, x[:2], y[:2], clip))
    assert mech.method == "bk"
    _assert_equal(mech.clipped_sum(x[2:], y[2:]), _loop(model, x[2:], y[2:], clip))
    assert mech.method == "vmap" and "at a batch of 4" in (mech.fallback or "")
    assert mech.checked_sizes == {2} and mech.note() == mech.fallback


def test_each_batch_size_is_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    model = WindowMajor(sample_major_up_to=100).double()  # exact for bk at every size
    x, y = _batch(8, (12,))
    clip = _median_clip(model, x, y)
    mech = _mechanism(model, clip)
    checks: list[int] = []
    original = mech.bk_mismatch

    def spy(xb: torch.Tensor, yb: torch.Tensor) -> str | None:
        checks.append(xb.shape[0])
        return original(xb, yb)

    monkeypatch.setattr(mech, "bk_mismatch", spy)
    for size in (1, 4, 4, 0, 1, 3, 4):
        _assert_equal(mech.clipped_sum(x[:size], y[:size]), _loop(model, x[:size], y[:size], clip))
    assert checks == [1, 4, 3] and mech.checked_sizes == {1, 3, 4}
    assert mech.method == "bk" and mech.note() is None


@pytest.mark.parametrize("method", ["ghost", "auto"])
def test_ghost_clipping_runs_a_conv1d_with_in_place_relus_exactly(method: str) -> None:
    """Opacus' hooks refused the in-place ReLU on a Conv1d's and a Linear's output ("modified
    inplace"), also under auto (bk has no Conv1d rule): each in-place module now gets a copy."""
    torch.manual_seed(0)
    model = Conv1dNet().double()
    x, y = _batch(8, (2, 8))
    clip = _median_clip(model, x, y)
    want = _loop(model, x, y, clip)
    mech = _mechanism(model, clip, method)
    assert mech.method == "ghost"
    for _ in range(2):  # the check's batch, then a checked size
        _assert_equal(mech.clipped_sum(x, y), want)
    assert mech.method == "ghost" and mech.fallback is None
    mech.close()
    assert not any(m._forward_pre_hooks for m in model.modules())


def test_an_in_place_dropout_in_training_draws_as_without_the_copy() -> None:
    """Training mode (the check runs without dropout): the in-place dropout after a hooked
    Linear runs on a copy, with the same draws as an out-of-place one."""
    sums = []
    for inplace in (True, False):
        torch.manual_seed(0)
        model = nn.Sequential(
            nn.Conv1d(2, 3, 3), nn.Flatten(), nn.Linear(18, 8), nn.Dropout(0.5, inplace=inplace)
        )
        model = nn.Sequential(model, nn.Linear(8, 2)).double().train()
        x, y = _batch(6, (2, 8))
        mech = _mechanism(model, 0.5, "ghost")
        mech.clipped_sum(x, y)  # the check (no dropout)
        torch.manual_seed(3)
        sums.append(mech.clipped_sum(x, y))
        assert mech.method == "ghost" and mech.fallback is None
    _assert_equal(sums[0], sums[1])


def test_an_in_place_operation_in_forward_code_falls_back_or_is_one_line() -> None:
    torch.manual_seed(0)
    model = Conv1dNet(functional=True).double()
    x, y = _batch(8, (2, 8))
    clip = _median_clip(model, x, y)
    want = _loop(model, x, y, clip)
    mech = _mechanism(model, clip)
    assert mech.method == "ghost"
    got = mech.clipped_sum(x, y)
    assert mech.method == "vmap" and "ghost clipping cannot run this model" in (mech.fallback or "")
    _assert_equal(got, want)
    with pytest.raises(FedbenchError, match="ghost clipping cannot run this model") as err:
        _mechanism(model, clip, "ghost").clipped_sum(x, y)
    assert "in-place" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.engine
@pytest.mark.parametrize(("batch", "noted"), [(1, True), (16, False)])
def test_summary_says_when_every_batch_held_one_sample(
    run_cli, tmp_path: Path, batch: int, noted: bool
) -> None:
    sets = ["privacy.noise_multiplier=1.0", "privacy.clip=1.0", f"fl.batch_size={batch}"]
    args = [a for s in sets for a in ("--set", s)]
    code, out, err = run_cli("train", *TINY, *args, "--out", str(tmp_path))
    assert code == 0, err
    (summary,) = tmp_path.rglob("summary.json")
    data = json.loads(summary.read_text())
    assert data["dp_clipping"] == "bk"
    note = data["dp_clipping_note"]
    if noted:
        assert "checked on batches of one sample only" in note
        assert (out + err).count("one sample only") == 1  # printed once, at the end
    else:
        assert note is None
