"""The escape-rate experiment of the FedAdamom paper ("escape rate experiments verify theory"):
a federated Styblinski-Tang problem whose sharp minimum is scaled by k, the escape rate Gamma
from it measured per k, and the exponent p of -log(Gamma) = a + b k^(-p) that the theory
predicts: p = 1 for FedAvgM and FedAdamom, p = 1/2 for FedAdam (the summary: "-log(Gamma) =
O(k^-1) (Pearson 0.998), while FedAdam only satisfies O(k^-1/2)").

No code of the experiment is public. The protocol follows the escape-rate experiments of Xie et
al.'s diffusion-theory papers (ICLR 2021, "A Diffusion Theory for Deep Learning Dynamics";
ICML 2022, "Adaptive Inertia") as far as their text goes, federated, and is built so that the
two laws can be told apart:

- Landscape: per coordinate the Styblinski-Tang function f(u) = (u^4 - 16 u^2 + 5 u) / 2, with
  a local minimum a = 2.7468, a saddle (barrier) b = 0.1567 and the global minimum at -2.9035.
  The sharpness is scaled without changing the barrier height: f_k(x) = f(sqrt(k) x), so the
  Hessian at every critical point is multiplied by k while Delta f = f(b) - f(a) stays fixed.
  Every coordinate carries f_k: FedAdamom's momentum on a coordinate is 1 - v_i / mean(v), and
  with all coordinates equally sharp that ratio (so the effective beta1 on the escape
  coordinate) does not drift with k. The escape is measured on coordinate 0.
- k spans more than a decade (geometric grid): over k in [1, 4], 1/k and k^(-1/2) correlate at
  r = 0.995 and no fit can tell them apart; over [1, 16] they separate.
- Noise: a client's stochastic gradient is grad f_k(x) + sqrt(H_a(k) / B) z, z ~ N(0, I): the
  minibatch noise near a minimum has covariance H / B (Xie et al.'s assumption), H_a(k) = k f''(a).
  B is set per optimizer so that its escape rates are measurable on the k grid: the theory
  predicts how -log(Gamma) depends on k, not its level, which differs between optimizers.
- Federation: each round S of the N clients run K local SGD steps (lr eta_l) from the global x;
  the server applies the optimizer's rule to Delta_bar. Both are fedbench's registered fedavgm,
  fedadam and fedadamom, driven by the engine's round protocol (fedbench.engine.protocol); the
  particles are one stacked federation whose server rule runs per particle
  (fedbench.figures.particles), so FedAdamom's model-wide mean of v is each particle's own.
- Trials: M independent particles start at the sharp minimum and run R rounds; a particle has
  escaped once coordinate 0 crosses the barrier b / sqrt(k). Gamma is the maximum-likelihood
  rate of a constant-hazard escape with censoring: escapes / rounds spent inside the well.
- Fit: -log(Gamma) = a + c log(k) + b k^(-p). The c log(k) term is Kramers' prefactor (the
  rate's prefactor sqrt(H_a |H_b|) / 2 pi scales with a power of k); it is fitted (setting
  `prefactor: fitted`, the default) or left out (`prefactor: none`). For each p on a grid the
  rest is linear least squares; p is the grid point of least squared error (profile
  likelihood), and its 95% interval is the percentile interval of the same fit on bootstrap
  resamples of the particles (each k resampled on its own).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from fedbench.algorithms import ALGORITHMS, Algorithm, ParamSpec, RoundInfo
from fedbench.engine.protocol import ClientStart, Federation, Trained, run_round
from fedbench.errors import FedbenchError
from fedbench.figures.particles import Particles, select_rows

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Styblinski-Tang (per coordinate): local minimum, barrier (local maximum).
ST_A, ST_B = 2.746803, 0.156731
OPTIMIZERS = ("fedavgm", "fedadam", "fedadamom")
#: The exponent p the theory predicts per optimizer (FedAdamom summary, "escape rate
#: experiments verify theory"), and the rival law's.
PREDICTED_P = {"fedavgm": 1.0, "fedadam": 0.5, "fedadamom": 1.0}
LABELS = {"fedavgm": "FedAvgM", "fedadam": "FedAdam", "fedadamom": "FedAdamom"}
#: The grid of exponents the profile fit searches.
P_GRID = np.round(np.arange(0.05, 3.0001, 0.01), 4)


def st_grad(u: Tensor) -> Tensor:
    """d/du of (u^4 - 16 u^2 + 5 u) / 2."""
    return 2.0 * u**3 - 16.0 * u + 2.5


def st_curvature(u: float) -> float:
    return 6.0 * u**2 - 16.0


def default_ks() -> tuple[float, ...]:
    """Eight sharpness values, geometric over [1, 16]."""
    return tuple(float(k) for k in np.round(np.geomspace(1.0, 16.0, 8), 4))


@dataclass(frozen=True)
class EscapeSetup:
    """The experiment's constants (the figure's settings fill trials, rounds, ks and seed)."""

    ks: tuple[float, ...] = field(default_factory=default_ks)
    trials: int = 2000
    rounds: int = 400
    dims: int = 4
    clients: int = 10
    sampled: int = 4
    local_steps: int = 2
    #: B of the noise covariance H / B, per optimizer: it sets the level of the escape rates (so
    #: that they are measurable over the k grid), not their dependence on k.
    batch: dict[str, float] = field(
        default_factory=lambda: {"fedavgm": 0.018, "fedadam": 0.002, "fedadamom": 0.004}
    )
    local_lr: float = 0.002
    server_lr: dict[str, float] = field(
        default_factory=lambda: {"fedavgm": 1.0, "fedadam": 0.15, "fedadamom": 1.0}
    )
    momentum: float = 0.9
    beta1: float = 0.9
    beta2_adam: float = 0.99
    tau: float = 1.0e-3
    beta2_adamom: float = 0.1
    eps_m: float = 1.0e-3
    prefactor: str = "fitted"
    #: Kramers' law is for rare escapes: a k enters the fit only when -log(Gamma) >= this (mean
    #: escape time >= e^2.5 ~ 12 rounds); faster escapes are drift, not barrier crossing.
    min_neg_log_gamma: float = 2.5
    bootstrap: int = 1000
    seed: int = 0


def registry_algorithm(name: str, s: EscapeSetup) -> Algorithm:
    """The registered algorithm `name` with the experiment's settings: local SGD at
    s.local_lr without weight decay or clipping, and the optimizer's server rule."""
    server: dict[str, Any] = {
        "fedavgm": {"momentum": s.momentum},
        "fedadam": {"beta1": s.beta1, "beta2": s.beta2_adam, "tau": s.tau},
        "fedadamom": {"beta2": s.beta2_adamom, "eps_m": s.eps_m},
    }[name]
    cls = ALGORITHMS.get(name)
    params = cls.Params(
        name=name,
        lr=s.local_lr,
        lr_schedule="constant",
        weight_decay=0.0,
        grad_clip=None,
        server_lr=s.server_lr[name],
        **server,
    )
    spec = ParamSpec(names=["x"], shapes=[torch.Size([s.dims])], heads={})
    return cls(params, spec, num_clients=s.clients)


def escape_run(name: str, k: float, s: EscapeSetup) -> tuple[np.ndarray, Tensor]:
    """The round in which each trial escaped (1-based; 0 for a trial still inside after
    s.rounds rounds), and the positions of those still inside (rows in trial order).

    Each trial is a federation of the registered algorithm (`registry_algorithm`), all of them
    one `Particles` federation driven by the engine's round protocol (fedbench.engine.protocol).
    Escaped particles leave the batch (nothing after the escape matters)."""
    gen = torch.Generator().manual_seed(s.seed * 1_000_003 + int(k * 1000) + OPTIMIZERS.index(name))
    scale = math.sqrt(k)
    noise_std = math.sqrt(k * st_curvature(ST_A) / s.batch[name])
    barrier = ST_B / scale
    algorithm = Particles(registry_algorithm(name, s))
    x = [torch.full((s.trials, s.dims), ST_A / scale, dtype=torch.float64)]
    fed = Federation(algorithm, x, algorithm.init_server_state(x), {})
    alive = torch.arange(s.trials)
    escaped_at = np.zeros(s.trials, dtype=np.int64)
    # The clients are alike (one landscape, fresh noise each step), so which S of the N are
    # sampled changes nothing: the first S, trained together as one (particles, S, d) tensor.
    clients = list(range(s.sampled))

    def train(starts: list[ClientStart]) -> list[Trained]:
        assert not any(start.local for start in starts), "local SGD keeps no local state"
        info = starts[0].info
        start = fed.x[0]
        y = start.unsqueeze(1).expand(len(start), len(starts), s.dims).clone()
        for step in range(1, info.local_steps + 1):
            z = torch.randn(y.shape, generator=gen, dtype=torch.float64)
            g = scale * st_grad(scale * y) + noise_std * z
            algorithm.local_step([y], [g], {}, step, info)
        return [Trained([y[:, i]]) for i in range(len(starts))]

    for r in range(s.rounds):
        info = RoundInfo(r, s.local_lr, s.local_steps, s.clients, s.sampled)
        run_round(fed, clients, info, train, clients_together=None)
        out = fed.x[0][:, 0] < barrier
        if out.any():
            escaped_at[alive[out].numpy()] = r + 1
            keep = ~out
            alive = alive[keep]
            fed = Federation(algorithm, [fed.x[0][keep]], select_rows(fed.server, keep), {})
            if len(alive) == 0:
                break
    return escaped_at, fed.x[0]


def escape_rounds(name: str, k: float, s: EscapeSetup) -> np.ndarray:
    """The round in which each trial escaped (1-based), 0 for a trial still inside after
    s.rounds rounds (`escape_run`)."""
    return escape_run(name, k, s)[0]


def escape_rate(escaped_at: np.ndarray, rounds: int) -> float:
    """Maximum-likelihood constant escape rate per round: escapes / rounds at risk (a censored
    trial is at risk for all `rounds`). NaN when nothing escaped."""
    escapes = int((escaped_at > 0).sum())
    if escapes == 0:
        return math.nan
    at_risk = float(np.where(escaped_at > 0, escaped_at, rounds).sum())
    return escapes / at_risk


@dataclass
class ExponentFit:
    """-log(Gamma) = a + c log(k) + b k^(-p): the fitted p, its bootstrap interval, and the
    linear coefficients at p (c is 0 when the prefactor term is left out)."""

    p: float
    interval: tuple[float, float]
    a: float
    b: float
    c: float
    points: int
    at_grid_edge: bool


def min_points(prefactor: str) -> int:
    """Points needed for a fit with one residual degree of freedom: a, b, p (and c)."""
    return 5 if prefactor == "fitted" else 4


def _design(ks: np.ndarray, p: float, prefactor: str) -> np.ndarray:
    columns = [np.ones_like(ks), ks**-p]
    if prefactor == "fitted":
        columns.append(np.log(ks))
    return np.stack(columns, axis=1)


def profile_fit(ks: np.ndarray, ys: np.ndarray, prefactor: str) -> np.ndarray:
    """For every row of ys (one data set each), the p on P_GRID of least squared error."""
    sse = np.empty((ys.shape[0], len(P_GRID)))
    for j, p in enumerate(P_GRID):
        design = _design(ks, p, prefactor)
        hat = design @ np.linalg.pinv(design)
        resid = ys - ys @ hat.T
        sse[:, j] = (resid**2).sum(axis=1)
    return P_GRID[np.argmin(sse, axis=1)]


def fit_exponent(
    ks: np.ndarray,
    ys: np.ndarray,
    boot_ys: np.ndarray | None = None,
    prefactor: str = "fitted",
    what: str = "the fit",
) -> ExponentFit:
    """Fit p in y = a + b k^(-p) [+ c log k] to (ks, ys); boot_ys (bootstraps x len(ks)) gives
    the 95% percentile interval. Fewer finite points than the fit needs is an error."""
    need = min_points(prefactor)
    finite = np.isfinite(ys)
    if finite.sum() < need:
        raise FedbenchError(
            f"{what} needs at least {need} sharpness values with rare escapes (-log(Gamma) >= "
            f"min_neg_log_gamma), got {int(finite.sum())}; raise rounds or trials"
        )
    ks, ys = ks[finite], ys[finite]
    p = float(profile_fit(ks, ys[None, :], prefactor)[0])
    coef = np.linalg.lstsq(_design(ks, p, prefactor), ys, rcond=None)[0]
    interval = (p, p)
    if boot_ys is not None:
        boots = boot_ys[:, finite]
        boots = boots[np.isfinite(boots).all(axis=1)]
        if len(boots):
            ps = profile_fit(ks, boots, prefactor)
            interval = (float(np.quantile(ps, 0.025)), float(np.quantile(ps, 0.975)))
    edge = p in (float(P_GRID[0]), float(P_GRID[-1]))
    return ExponentFit(
        p,
        interval,
        float(coef[0]),
        float(coef[1]),
        float(coef[2]) if prefactor == "fitted" else 0.0,
        int(finite.sum()),
        edge,
    )


def bootstrap_neg_log_rates(
    escaped: list[np.ndarray], rounds: int, n: int, seed: int
) -> np.ndarray:
    """-log(Gamma) of `n` bootstrap resamples of the trials of every k (n x len(escaped))."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, len(escaped)))
    for j, times in enumerate(escaped):
        idx = rng.integers(0, len(times), size=(n, len(times)))
        picked = times[idx]
        escapes = (picked > 0).sum(axis=1)
        at_risk = np.where(picked > 0, picked, rounds).sum(axis=1)
        with np.errstate(divide="ignore"):
            out[:, j] = -np.log(escapes / at_risk)
    out[~np.isfinite(out)] = np.nan
    return out


def verdict(fit: ExponentFit, predicted: float) -> bool | None:
    """True when the interval holds the predicted p and not the rival law's, False when it
    misses the predicted p, None when it holds both (the data cannot tell the laws apart)."""
    rival = 0.5 if predicted == 1.0 else 1.0
    lo, hi = fit.interval
    if not lo <= predicted <= hi:
        return False
    return None if lo <= rival <= hi else True


def run_escape(s: EscapeSetup) -> dict:
    """Escape rounds, rates and the exponent fit per optimizer."""
    out: dict = {"setup": {**s.__dict__, "ks": list(s.ks)}, "optimizers": {}}
    ks = np.array(s.ks, dtype=np.float64)
    for name in OPTIMIZERS:
        escaped = [escape_rounds(name, k, s) for k in s.ks]
        gammas = [escape_rate(e, s.rounds) for e in escaped]
        ys = np.array([-math.log(g) if g == g else math.nan for g in gammas])
        boot = bootstrap_neg_log_rates(escaped, s.rounds, s.bootstrap, s.seed)
        in_fit = np.isfinite(ys) & (ys >= s.min_neg_log_gamma)
        fit = fit_exponent(
            ks,
            np.where(in_fit, ys, np.nan),
            np.where(in_fit, boot, np.nan),
            s.prefactor,
            what=f"the {LABELS[name]} exponent fit",
        )
        with warnings.catch_warnings():  # a k with no escapes has no spread: NaN, no warning
            warnings.simplefilter("ignore", RuntimeWarning)
            spread = np.nanstd(boot, axis=0)
        rows = [
            {
                "k": float(k),
                "escaped": float((e > 0).mean()),
                "gamma": g,
                "neg_log_gamma": float(y),
                "neg_log_gamma_se": float(se),
                "in_fit": bool(used),
            }
            for k, e, g, y, se, used in zip(s.ks, escaped, gammas, ys, spread, in_fit, strict=True)
        ]
        out["optimizers"][name] = {"rows": rows, "fit": fit.__dict__}
    return out


def draw_escape_figure(result: dict) -> Figure:
    """Left: -log(Gamma) against k (log axis) with each optimizer's fitted curve; right: the
    fitted exponent p with its bootstrap interval beside the predicted 1 and 1/2."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), width_ratios=(1.6, 1))
    names = list(result["optimizers"])
    for i, name in enumerate(names):
        data = result["optimizers"][name]
        fit = data["fit"]
        ks = np.array([r["k"] for r in data["rows"]])
        ys = np.array([r["neg_log_gamma"] for r in data["rows"]])
        se = np.array([r["neg_log_gamma_se"] for r in data["rows"]])
        used = np.array([r["in_fit"] for r in data["rows"]])
        (shown,) = left.plot(ks[used], ys[used], "o", label=LABELS[name])
        color = shown.get_color()
        left.plot(ks[~used], ys[~used], "o", mfc="white", color=color)
        left.errorbar(ks, ys, yerr=1.96 * se, fmt="none", capsize=2, color=color)
        grid = np.geomspace(ks[used].min(), ks[used].max(), 50)
        curve = fit["a"] + fit["b"] * grid ** -fit["p"] + fit["c"] * np.log(grid)
        left.plot(grid, curve, "-", color=color, lw=1)
        lo, hi = fit["interval"]
        right.errorbar(
            [fit["p"]], [i], xerr=[[fit["p"] - lo], [hi - fit["p"]]], fmt="o", capsize=3,
            color=color,
        )  # fmt: skip
        right.plot([PREDICTED_P[name]], [i], "k*", ms=10)
    left.set_xscale("log")
    left.set_xlabel("sharpness k")
    left.set_ylabel("-log(escape rate per round)")
    left.set_title("open: fast escapes, left out of the fit", fontsize=8)
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    right.axvline(1.0, color="grey", lw=0.8, ls="--")
    right.axvline(0.5, color="grey", lw=0.8, ls=":")
    right.set_yticks(range(len(names)), [LABELS[n] for n in names])
    right.set_ylim(-0.6, len(names) - 0.4)
    right.set_xlabel("fitted exponent p (95% bootstrap interval); * predicted")
    right.grid(alpha=0.3, axis="x")
    setup = result["setup"]
    prefactor = "c log k fitted" if setup["prefactor"] == "fitted" else "no prefactor term"
    fig.suptitle(
        f"Escape from a sharp minimum: -log(Gamma) = a + b k^-p ({prefactor}); "
        f"{setup['trials']} trials x {setup['rounds']} rounds per k",
        fontsize=10,
    )
    fig.tight_layout()
    return fig
