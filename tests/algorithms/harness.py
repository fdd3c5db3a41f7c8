"""The one test harness of the update rules: a tiny float64 federated least-squares problem and a
driver that runs an Algorithm object through the engine's round protocol (client_begin, K
local_steps, client_end, the streaming mean of the uploads, server_update), so that each rule can be
compared with a hand computation on flat vectors.

Hand computations compare at TOL = 1e-12 in float64 and use EPS = 1e-3 in Adam-type rules, large
enough that a rule which drops or misplaces eps fails (1e-8 vanishes beside sqrt(v) ~ 1e-1)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import torch
from torch import Tensor

from fedbench.algorithms import ALGORITHMS, Algorithm, ParamSpec, RoundInfo
from fedbench.algorithms.base import StepOracle
from fedbench.engine.protocol import ClientStart, Federation, Trained, run_round

SHAPES = [torch.Size([3, 2]), torch.Size([2])]
#: b plays the model's head and a BatchNorm layer's affine part for the personalised methods
#: that split the model (fedbench.algorithms.split); every other rule ignores both fields.
SPEC = ParamSpec(
    names=["weight", "bias"],
    shapes=SHAPES,
    heads={},
    head_params=frozenset({"bias"}),
    batchnorm_params=frozenset({"bias"}),
)
#: eps of the Adam-type rules in hand-computed tests, and the tolerance of those comparisons.
EPS = 1e-3
TOL = 1e-12


def flatten(tensors: list[Tensor]) -> Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])


def unflatten(vec: Tensor) -> list[Tensor]:
    out, offset = [], 0
    for shape in SHAPES:
        n = shape.numel()
        out.append(vec[offset : offset + n].reshape(shape).clone())
        offset += n
    return out


def tensor_means(vec: Tensor) -> Tensor:
    """The per-tensor block means of a flat vector (blocks: tensor)."""
    return torch.stack([part.mean() for part in vec.split([s.numel() for s in SHAPES])])


def expand_tensor_means(means: Tensor) -> Tensor:
    """A flat vector holding each tensor's block mean on every coordinate of that tensor."""
    return torch.cat([means[j].expand(s.numel()) for j, s in enumerate(SHAPES)])


class Problem:
    """Client i: features A_i (n x 3), targets T_i (n x 2); loss_i = mean_j 0.5||A_i W + b - T_i||^2.

    `shift` makes the clients' optima differ (heterogeneity)."""

    def __init__(self, clients: int = 3, n: int = 6, seed: int = 0, shift: float = 1.0) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.N = clients
        self.A = [torch.randn(n, 3, generator=gen, dtype=torch.float64) for _ in range(clients)]
        self.T = [
            torch.randn(n, 2, generator=gen, dtype=torch.float64) + shift * (i - clients / 2)
            for i in range(clients)
        ]

    def x0(self) -> list[Tensor]:
        gen = torch.Generator().manual_seed(123)
        return [torch.randn(s, generator=gen, dtype=torch.float64) * 0.5 for s in SHAPES]

    def grad(self, params: list[Tensor], i: int) -> list[Tensor]:
        w, b = (p.detach().clone().requires_grad_(True) for p in params)
        loss = 0.5 * ((self.A[i] @ w + b - self.T[i]) ** 2).sum(dim=1).mean()
        return list(torch.autograd.grad(loss, [w, b]))

    def flat_grad(self, vec: Tensor, i: int) -> Tensor:
        return flatten(self.grad(unflatten(vec), i))

    def optimum(self) -> Tensor:
        """argmin of (1/N) sum_i loss_i (closed form, flat)."""
        lhs = torch.zeros(4, 4, dtype=torch.float64)
        rhs = torch.zeros(4, 2, dtype=torch.float64)
        for a, t in zip(self.A, self.T, strict=True):
            aug = torch.cat([a, torch.ones(len(a), 1, dtype=torch.float64)], dim=1)
            lhs += aug.T @ aug / len(a)
            rhs += aug.T @ t / len(a)
        sol = torch.linalg.solve(lhs, rhs)  # rows 0..2: W, row 3: b
        return torch.cat([sol[:3].reshape(-1), sol[3]])


def make(name: str, clients: int = 3, **fields: Any) -> Algorithm:
    """The registered algorithm with exact-test settings (no clipping, constant lr) + fields."""
    cls = ALGORITHMS.get(name)
    params = cls.Params(name=name, grad_clip=None, lr_schedule="constant", **fields)
    return cls(params, SPEC, num_clients=clients)


def run_federated(
    alg: Algorithm,
    problem: Problem,
    *,
    rounds: int,
    local_steps: int,
    lr: Callable[[int], float] | float,
    sampled: list[list[int]] | None = None,
    noise_std: float = 0.0,
    oracle: bool = False,
    steps_of: Callable[[int, int], int] | None = None,
) -> tuple[list[Tensor], dict[str, Any], dict[int, Any]]:
    """Run `rounds` rounds of the engine's round protocol (fedbench.engine.protocol: its client
    states, uniform weighting, streaming mean and server step) with the least-squares gradient
    as each client's objective; returns x, server, client states.

    `noise_std` is the per-coordinate std of the privatised gradient's noise that a DP rule is told
    about (RoundInfo.grad_noise_std); the gradients themselves stay exact. With `oracle`, each
    step goes through `local_step_with_oracle` (the sequential engine's entry point), for rules
    that take several gradients per step. `steps_of(round, client)` gives each client its own
    number of local steps K_i (system heterogeneity), passed to its hooks as info.local_steps
    as the engine does; the server step keeps `local_steps`."""
    lr_of = lr if callable(lr) else (lambda r: lr)
    x = problem.x0()
    fed = Federation(alg, x, alg.init_server_state(x), {})

    def train(starts: list[ClientStart]) -> list[Trained]:
        (start,) = starts
        i, local, info = start.client, start.local, start.info
        y = [t.clone() for t in x]
        for k in range(1, info.local_steps + 1):
            if oracle:
                gradient = StepOracle(lambda: problem.grad(y, i))
                alg.local_step_with_oracle(y, gradient, local, k, info)
                continue
            g = problem.grad(y, i)
            with torch.no_grad():
                alg.local_step(y, g, local, k, info)
        return [Trained(y)]

    for r in range(rounds):
        clients = sampled[r] if sampled is not None else list(range(problem.N))
        info = RoundInfo(
            r, lr_of(r), local_steps, problem.N, len(clients), grad_noise_std=noise_std
        )
        own_steps = None if steps_of is None else partial(steps_of, r)
        run_round(fed, clients, info, train, steps_of=own_steps)
    return x, fed.server, fed.client_states


def assert_close(
    actual: list[Tensor] | tuple[Tensor, ...] | Tensor, expected: Tensor, tol: float = TOL
) -> None:
    """Flat comparison at `tol` (absolute and relative) in float64."""
    flat = actual if isinstance(actual, Tensor) else flatten(list(actual))
    assert flat.dtype == torch.float64, "hand-computed comparisons run in float64"
    torch.testing.assert_close(flat, expected, atol=tol, rtol=tol)
