"""A tiny float64 federated problem and a driver that runs an Algorithm object round by round
with full-batch gradients and every client every round (the setting of the hand-computed tests)."""

from __future__ import annotations

import torch

from fedbench.algorithms import ALGORITHMS, Algorithm, ParamSpec, RoundInfo
from fedbench.config import RunConfig

SHAPES = [torch.Size([2, 3]), torch.Size([2])]


def make_clients(
    n_clients: int = 3, n_samples: int = 4, seed: int = 0
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Heterogeneous least-squares clients: (A_i, T_i) with different targets per client."""
    gen = torch.Generator().manual_seed(seed)
    clients = []
    for i in range(n_clients):
        a = torch.randn(n_samples, 3, generator=gen, dtype=torch.float64)
        t = torch.randn(n_samples, 2, generator=gen, dtype=torch.float64) + i
        clients.append((a, t))
    return clients


def initial_x(seed: int = 1) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=gen, dtype=torch.float64) for s in SHAPES]


def loss_fn(params: list[torch.Tensor], client: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    a, t = client
    w, b = params
    return 0.5 * ((a @ w.T + b - t) ** 2).sum(dim=1).mean()


def grad(
    params: list[torch.Tensor], client: tuple[torch.Tensor, torch.Tensor]
) -> list[torch.Tensor]:
    ps = [p.detach().clone().requires_grad_(True) for p in params]
    return list(torch.autograd.grad(loss_fn(ps, client), ps))


def build(name: str, n_clients: int = 3, **fields) -> Algorithm:
    cfg = RunConfig.model_validate({"algorithm": {"name": name, **fields}})
    spec = ParamSpec(names=["w", "b"], shapes=SHAPES, heads={})
    return ALGORITHMS.get(name)(cfg.algorithm, spec, num_clients=n_clients)


def simulate(
    algo: Algorithm,
    x: list[torch.Tensor],
    clients: list[tuple[torch.Tensor, torch.Tensor]],
    *,
    rounds: int,
    local_steps: int,
    lrs: list[float],
) -> list[torch.Tensor]:
    """The engine's round structure, full-batch, no clipping, uniform weights; returns x."""
    x = [t.clone() for t in x]
    server = algo.init_server_state(x)
    stored: dict[int, dict] = {}
    for r in range(rounds):
        info = RoundInfo(r, lrs[r], local_steps, len(clients), len(clients))
        sums: dict[str, list[torch.Tensor]] = {}
        for i, data in enumerate(clients):
            y = [t.clone() for t in x]
            local = algo.client_begin(x, server, stored.get(i), info)
            for k in range(1, local_steps + 1):
                algo.local_step(y, grad(y, data), local, k, info)
            upload, new_state = algo.client_end(y, x, local, stored.get(i), info)
            if new_state is not None:
                stored[i] = new_state
            for key, ts in upload.items():
                sums[key] = (
                    [t.clone() for t in ts]
                    if key not in sums
                    else [s + t for s, t in zip(sums[key], ts)]
                )
        mean = {k: [t / len(clients) for t in v] for k, v in sums.items()}
        algo.server_update(x, mean, server, info)
    return x


def assert_close(
    actual: list[torch.Tensor], expected: list[torch.Tensor], tol: float = 1e-6
) -> None:
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e, atol=tol, rtol=0)
