"""The one objective: cross-entropy with label smoothing, each reduction, the private upcast
and the functional call, against hand computations in float64."""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from fedbench.step import Objective, split_model
from fedbench.step.objective import full_precision

LOGITS = torch.tensor([[2.0, -1.0, 0.5], [0.1, 0.2, 3.0]], dtype=torch.float64)
Y = torch.tensor([0, 1])


def _hand(logits: torch.Tensor, y: torch.Tensor, s: float) -> list[float]:
    """-(1 - s) log p_t - s / C sum_c log p_c, per sample."""
    out = []
    for row, t in zip(logits.tolist(), y.tolist(), strict=True):
        log_z = math.log(sum(math.exp(v) for v in row))
        log_p = [v - log_z for v in row]
        c = len(row)
        out.append(-(1 - s) * log_p[t] - s / c * sum(log_p))
    return out


def test_plain_cross_entropy_and_its_reductions() -> None:
    want = _hand(LOGITS, Y, 0.0)
    o = Objective()
    assert torch.allclose(o.loss(LOGITS, Y, "none"), torch.tensor(want, dtype=torch.float64))
    assert abs(float(o.loss(LOGITS, Y)) - sum(want) / 2) < 1e-12
    assert abs(float(o.loss(LOGITS, Y, "sum")) - sum(want)) < 1e-12


def test_label_smoothing_is_the_smoothed_target() -> None:
    want = _hand(LOGITS, Y, 0.1)
    got = Objective(label_smoothing=0.1).loss(LOGITS, Y, "none")
    assert torch.allclose(got, torch.tensor(want, dtype=torch.float64), rtol=0, atol=1e-12)
    # It moves the loss: the smoothing acts.
    assert abs(want[0] - _hand(LOGITS, Y, 0.0)[0]) > 0.05


def test_masked_mean_averages_the_real_samples_only() -> None:
    o = Objective()
    w = torch.tensor([1.0, 0.0], dtype=torch.float64)
    assert abs(float(o.masked_mean(LOGITS, Y, w)) - _hand(LOGITS, Y, 0.0)[0]) < 1e-12
    assert float(o.masked_mean(LOGITS, Y, None)) == float(o.loss(LOGITS, Y))


def test_private_loss_upcasts_half_precision_logits() -> None:
    half = LOGITS.to(torch.bfloat16)
    assert full_precision(half).dtype == torch.float32
    assert full_precision(LOGITS).dtype == torch.float64
    assert Objective().private_loss(half, Y).dtype == torch.float32


def test_functional_loss_is_the_models_own_loss() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 3)).double()
    model[0].bias.requires_grad_(False)  # a frozen parameter: a constant of the split
    split = split_model(model)
    assert split.names == ["0.weight", "1.weight", "1.bias", "2.weight", "2.bias"]
    assert split.buffer_names == ["1.running_mean", "1.running_var", "1.num_batches_tracked"]
    assert set(split.constants) == {"0.bias"}
    x = torch.randn(5, 3, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 0, 1])
    params = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
    buffers = {n: b.clone() for n, b in model.named_buffers()}
    got = Objective(0.2).functional(model.eval(), split, params, buffers, x, y)
    want = nn.functional.cross_entropy(model.eval()(x), y, label_smoothing=0.2)
    assert abs(float(got) - float(want)) < 1e-12


def test_the_loss_is_written_once() -> None:
    """Only the objective computes a cross-entropy (issue: one client step, written once)."""
    root = Path(__file__).resolve().parents[2] / "fedbench"
    found = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        for line in path.read_text().splitlines()
        if "cross_entropy(" in line and not line.lstrip().startswith("#")
    ]
    assert found == ["step/objective.py"]
