"""fedrod: the body and generic head step on the balanced softmax's gradient (logits + log n_i),
the personal head on the plain cross-entropy of the summed logits with detached features, both
from the values before the step; the personalised model is the summed head. By hand in float64
on a one-hidden-layer network z = tanh(A x + a), logits W z + b."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import Tensor

from fedbench.algorithms.base import ParamSpec, RoundInfo, StepOracle
from fedbench.algorithms.registry import ALGORITHMS
from fedbench.errors import FedbenchError
from fedbench.personal.methods.fedrod import ABSENT_COUNT, log_counts

D = torch.float64
NAMES = ("body.weight", "body.bias", "head.weight", "head.bias")
SHAPES = ((4, 3), (4,), (3, 4), (3,))
HEAD = frozenset({"head.weight", "head.bias"})
SPEC = ParamSpec(list(NAMES), [torch.Size(s) for s in SHAPES], {}, head_params=HEAD)
COUNTS = np.array([[5, 2, 0], [1, 1, 6]])


def make(**fields: object):
    cls = ALGORITHMS.get("fedrod")
    params = cls.Params(name="fedrod", grad_clip=None, lr_schedule="constant", **fields)
    alg = cls(params, SPEC, num_clients=2)
    alg.set_class_counts(COUNTS)
    return alg


def batch() -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(3)
    return torch.randn(5, 3, generator=g, dtype=D), torch.tensor([0, 1, 0, 2, 1])


def start() -> list[Tensor]:
    g = torch.Generator().manual_seed(7)
    return [torch.randn(*s, generator=g, dtype=D) * 0.5 for s in SHAPES]


def oracle(y: list[Tensor], xb: Tensor, t: Tensor) -> StepOracle:
    """The engine's objective: the batch's mean plain cross-entropy at the current y."""

    def compute() -> list[Tensor]:
        p = [v.detach().requires_grad_(True) for v in y]
        logits = torch.tanh(xb @ p[0].T + p[1]) @ p[2].T + p[3]
        loss = torch.nn.functional.cross_entropy(logits, t)
        return list(torch.autograd.grad(loss, p))

    return StepOracle(compute)


def reference_step(y, head, offset, xb, t, lr, wd, detach=True):
    """One step written out: softmax gradients, backpropagation through tanh by hand."""
    A, a, W, b = y
    P, q = head
    B = len(t)
    onehot = torch.nn.functional.one_hot(t, 3).to(D)
    z = torch.tanh(xb @ A.T + a)
    dU = (torch.softmax(z @ W.T + b + offset, 1) - onehot) / B  # balanced softmax
    dV = (torch.softmax(z @ (W + P).T + (b + q), 1) - onehot) / B  # summed logits
    dz = dU @ W + (0 if detach else dV @ (W + P))
    dpre = dz * (1 - z**2)
    g = [dpre.T @ xb, dpre.sum(0), dU.T @ z, dU.sum(0)]
    h = [dV.T @ z, dV.sum(0)]
    new_y = [v - lr * (gv + wd * v) for v, gv in zip(y, g, strict=True)]
    new_head = [v - lr * (hv + wd * v) for v, hv in zip(head, h, strict=True)]
    return new_y, new_head


@pytest.mark.parametrize("detach", [True, False])
def test_fedrod_steps_by_hand(detach: bool) -> None:
    alg = make(lr=0.3, weight_decay=0.01, detach_body=detach)
    x = start()
    xb, t = batch()
    info = RoundInfo(0, 0.3, 3, 2, 1)
    stored = alg.new_client_state(0, x)
    assert stored is not None
    offset = torch.tensor([np.log(5.0), np.log(2.0), np.log(ABSENT_COUNT)], dtype=D)
    torch.testing.assert_close(stored["log_counts"], offset, rtol=0, atol=0)
    assert all(not h.any() for h in stored["head"])
    local = alg.client_begin(x, {}, stored, info)
    y = [v.clone() for v in x]
    ref_y, ref_head = [v.clone() for v in x], [torch.zeros(3, 4, dtype=D), torch.zeros(3, dtype=D)]
    for k in (1, 2, 3):
        alg.local_step_with_oracle(y, oracle(y, xb, t), local, k, info)
        ref_y, ref_head = reference_step(ref_y, ref_head, offset, xb, t, 0.3, 0.01, detach)
    for got, want in zip([*y, *local["head"]], [*ref_y, *ref_head], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    upload, state = alg.client_end(y, x, local, stored, info)
    # Body and generic head are uploaded whole; the personal head stays in the state.
    for got, want in zip(upload["delta"], ref_y, strict=True):
        assert got.shape == want.shape
    torch.testing.assert_close(
        torch.cat([d.flatten() for d in upload["delta"]]),
        torch.cat([(r - v).flatten() for r, v in zip(ref_y, x, strict=True)]),
        rtol=1e-12,
        atol=1e-12,
    )
    assert state is not None
    torch.testing.assert_close(state["head"][0], ref_head[0], rtol=1e-12, atol=1e-12)
    assert state["head"][0] is not local["head"][0]
    # the personalised model: one head (W + P, b + q) predicts the sum of both heads' logits
    model = [v.clone() for v in ref_y]
    alg.load_personalised(model, [], state)
    z = torch.tanh(xb @ ref_y[0].T + ref_y[1])
    summed = z @ model[2].T + model[3]
    generic = z @ ref_y[2].T + ref_y[3]
    personal = z @ ref_head[0].T + ref_head[1]
    torch.testing.assert_close(summed, generic + personal, rtol=1e-12, atol=1e-12)
    assert (personal != 0).any()
    plain = [v.clone() for v in ref_y]
    alg.load_client(plain, [], state)  # the client trains the generic model: nothing loaded
    assert all(torch.equal(a, b) for a, b in zip(plain, ref_y, strict=True))


def test_balanced_softmax_is_the_shifted_bias() -> None:
    """The reading the rule rests on: CE(logits + log n) has the gradient of the plain CE with
    the head's bias shifted by log n, at every parameter."""
    x = start()
    xb, t = batch()
    offset = torch.tensor(log_counts([3, 1, 4]), dtype=D)
    p = [v.clone().requires_grad_(True) for v in x]
    z = torch.tanh(xb @ p[0].T + p[1])
    loss = torch.nn.functional.cross_entropy(z @ p[2].T + p[3] + offset, t)
    direct = torch.autograd.grad(loss, p)
    shifted = [*x[:3], x[3] + offset]
    via_bias = oracle(shifted, xb, t)()
    for a, b in zip(direct, via_bias, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_counts_and_a_new_client() -> None:
    alg = make()
    x = start()
    state = alg.new_client_state(1, x)
    assert state is not None
    assert state["log_counts"].tolist() == pytest.approx([0.0, 0.0, np.log(6.0)], abs=1e-15)
    assert alg.stored_floats() == 3 * 4 + 2 * 3
    # an unseen client (no stored state) is tested with the generic model
    model = [v.clone() for v in x]
    alg.load_personalised(model, [], None)
    assert all(torch.equal(a, b) for a, b in zip(model, x, strict=True))
    assert alg.finetune_names() == SPEC.head_params


def test_a_head_that_is_not_one_linear_layer_is_refused() -> None:
    spec = ParamSpec(list(NAMES), [torch.Size(s) for s in SHAPES], {}, frozenset({"head.weight"}))
    cls = ALGORITHMS.get("fedrod")
    with pytest.raises(FedbenchError, match="one linear layer with a bias"):
        cls(cls.Params(name="fedrod"), spec, num_clients=2)
