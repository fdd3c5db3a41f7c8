"""fedadamw (FedAdamW Algorithm 2): block-mean v restored on the clients, v bias-corrected with
the global t, alignment alpha * Delta_G with the next round's lr, decoupled decay."""

import torch

from tests.algorithms.helpers import SHAPES, Problem, assert_close, flatten, make, run_federated
from tests.algorithms.test_local_adamw import local_adamw_reference


def _expand_tensor_means(means: torch.Tensor) -> torch.Tensor:
    return torch.cat([means[j].expand(s.numel()) for j, s in enumerate(SHAPES)])


def _tensor_means(vec: torch.Tensor) -> torch.Tensor:
    return torch.stack([part.mean() for part in vec.split([s.numel() for s in SHAPES])])


def test_fedadamw_three_rounds_by_hand() -> None:
    problem, K, wd, alpha, b1, b2, eps = Problem(), 3, 0.05, 0.5, 0.8, 0.95, 1e-8
    lrs = [0.02, 0.01, 0.015]
    alg = make("fedadamw", weight_decay=wd, alpha=alpha, beta1=b1, beta2=b2, eps=eps)
    x, server, _ = run_federated(alg, problem, rounds=3, local_steps=K, lr=lambda r: lrs[r])

    ref = flatten(problem.x0())
    v_bar = torch.zeros(len(SHAPES), dtype=torch.float64)
    delta_g = torch.zeros_like(ref)
    for r in range(3):
        deltas, blocks = [], []
        for i in range(problem.N):
            y, m, v = ref.clone(), torch.zeros_like(ref), _expand_tensor_means(v_bar)
            for k in range(1, K + 1):
                t = r * K + k
                g = problem.flat_grad(y, i)
                m = b1 * m + (1 - b1) * g
                v = b2 * v + (1 - b2) * g**2
                m_hat, v_hat = m / (1 - b1**k), v / (1 - b2**t)
                y = y - lrs[r] * (m_hat / (v_hat.sqrt() + eps) + alpha * delta_g + wd * y)
            deltas.append(y - ref)
            blocks.append(_tensor_means(v))
        delta_bar = torch.stack(deltas).mean(0)
        ref = ref + delta_bar
        delta_g = -delta_bar / (K * lrs[r])
        v_bar = torch.stack(blocks).mean(0)
    assert_close(x, ref)
    assert_close(server["v_bar"], v_bar)


def test_fedadamw_without_alignment_and_aggregation_is_local_adamw() -> None:
    # FedAdamW Table 7: alpha 0, v_agg none, m_agg false must equal local_adamw exactly.
    problem, K, lr, wd = Problem(), 4, 0.02, 0.05
    alg = make(
        "fedadamw", weight_decay=wd, alpha=0.0, v_agg="none", beta1=0.8, beta2=0.95, eps=1e-6
    )
    x, _, _ = run_federated(alg, problem, rounds=2, local_steps=K, lr=lr)
    ref = local_adamw_reference(problem, 2, K, lr, wd, (0.8, 0.95), 1e-6)
    assert_close(x, ref, tol=1e-10)
    assert alg.comm_up() == 8.0
