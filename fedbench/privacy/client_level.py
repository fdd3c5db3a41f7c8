"""Client-level differential privacy (`privacy.level: client`): DP-FedAvg (McMahan, Ramage,
Talwar & Zhang, "Learning Differentially Private Recurrent Language Models", ICLR 2018) with the
optional adaptive clipping of Andrew, Thakkar, McMahan & Ramaswamy ("Differentially Private
Learning with Adaptive Clipping", NeurIPS 2021, Algorithm 1).

Each round, every participating client's upload u_i (all of its uploaded tensors together: for
the FedAvg family, Delta_i) is clipped to L2 norm C, and the server privatises their sum with
one Gaussian draw before the algorithm's server step sees it:

    u_i <- u_i * min(1, C / ||u_i||)
    u_bar = (sum_{i in S} u_i + N(0, sigma_u^2 C^2 I)) / S            (S: the round's clients)

With adaptive clipping, the fraction of unclipped updates is privatised too and moves C toward
the gamma-quantile of the update norms:

    b_bar = (sum_i 1[||u_i|| <= C] + N(0, sigma_b^2)) / S
    C <- C * exp(-eta_C * (b_bar - gamma))
    sigma_u = (z^-2 - (2 sigma_b)^-2)^(-1/2)                          (Andrew et al., Thm. 1)

so that the two releases together cost what one Gaussian release with noise multiplier z
(`privacy.noise_multiplier`) costs. The accountant treats each round as one Poisson-subsampled
Gaussian mechanism with rate q = S / N and noise multiplier z; epsilon is the same for every
client. Which mechanism runs (`privacy.sampling`):

- `fixed` (default): exactly S of the N clients, uniformly without replacement, accounted as
  Poisson sampling at q = S / N, as McMahan et al. do: an approximation that can understate
  epsilon (fixed-size sampling is a different mechanism; fedbench.privacy.status), and the
  denominators are the round's client count (public, since S is fixed and the schedule is
  data-independent).
- `poisson`: every client joins each round independently with probability q: the accounted
  mechanism itself. The denominators are then the expected count S (a realised count would
  depend on who joined), as in McMahan et al.'s fixed-denominator estimator.

With `fl.dropout` a sampled client that drops out releases nothing but is accounted at q: the
reported epsilon is then an upper bound. `accounting()` says which of these holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
import torch
from torch import Tensor

from fedbench.algorithms.base import Upload, squared_norm
from fedbench.config import PrivacyConfig
from fedbench.errors import FedbenchError
from fedbench.privacy.accounting import Account, account, calibrate_noise, worst_epsilon
from fedbench.privacy.status import accounting_status

#: Salt of the server's noise stream (independent of the clients' batch and noise streams).
_SERVER_NOISE_SALT = 0xC11E


@dataclass(frozen=True)
class ClientLevelPlan:
    """The accountant's view of a client-level private run."""

    config: PrivacyConfig
    #: z: privacy.noise_multiplier, or the one calibrated to target_epsilon.
    noise_multiplier: float
    #: q = S / N.
    rate: float
    rounds: int
    #: S, the clients sampled per round: the denominator of the noisy mean's count noise default.
    expected_clients: int
    num_clients: int
    #: fl.dropout: sampled clients that drop out release nothing (epsilon is then a bound).
    dropout: float = 0.0

    level: ClassVar[Literal["client"]] = "client"

    @property
    def poisson(self) -> bool:
        """Poisson client sampling (privacy.sampling: poisson): the accounted mechanism."""
        return self.config.sampling == "poisson"

    def denominator(self, count: int) -> int:
        """What the round's sums are divided by: the expected S under Poisson sampling, else
        the round's count of clients (exactly S unless some dropped out)."""
        return self.expected_clients if self.poisson else count

    def accounting(self) -> dict[str, str]:
        """Which mechanism the accountant analysed and how the reported epsilon relates to the
        one that ran (fedbench.privacy.status): "accounting" is `exact`, `approximate` (may be
        understated) or `upper bound`, with its "direction" and "why"."""
        model = (
            f"{self.rounds} Poisson-subsampled Gaussian releases, q = S/N = "
            f"{self.expected_clients}/{self.num_clients}, noise multiplier "
            f"{self.noise_multiplier:.4g} ({self.config.accountant})"
        )
        dropped = (
            "clients that drop out release nothing but are accounted at q"
            if self.dropout > 0
            else None
        )
        return accounting_status("client", self.config.sampling, dropped).as_dict(model)

    def epsilon(self, rounds_done: int | None = None) -> float:
        """epsilon after `rounds_done` rounds (default: the whole run); the same for every client."""
        return worst_epsilon(
            self.noise_multiplier,
            [self.account(rounds_done)],
            self.config.delta,
            self.config.accountant,
        )

    def account(self, rounds_done: int | None = None) -> Account:
        """Every client's releases after `rounds_done` rounds (default: the whole run): one
        Gaussian release of the round's clipped updates per round, at q = S / N."""
        rounds = self.rounds if rounds_done is None else rounds_done
        return account(self.rate, {1: rounds})

    def client_epsilons(self) -> list[float]:
        return [self.epsilon()] * self.num_clients

    @property
    def count_noise(self) -> float:
        """sigma_b of the unclipped-count release (adaptive clipping)."""
        return self.config.count_noise or self.expected_clients / 20.0

    @property
    def update_noise_multiplier(self) -> float:
        """sigma_u: z, or with adaptive clipping the share of z left for the update."""
        z = self.noise_multiplier
        if not self.config.adaptive_clip:
            return z
        if z == 0:
            return 0.0
        rest = z**-2 - (2.0 * self.count_noise) ** -2
        if rest <= 0:
            raise FedbenchError(
                f"privacy.count_noise {self.count_noise:g} is too small for noise_multiplier "
                f"{z:g}: adaptive clipping needs count_noise > noise_multiplier / 2 = "
                f"{z / 2:g}; set privacy.count_noise (default: clients per round / 20)"
            )
        return rest**-0.5


def poisson_clients_of(privacy: PrivacyConfig | None) -> bool:
    """Whether the client schedule is Poisson-sampled: client-level DP with sampling poisson."""
    return privacy is not None and privacy.level == "client" and privacy.sampling == "poisson"


def client_level_plan(
    cfg_privacy: PrivacyConfig,
    num_clients: int,
    sampled: int,
    rounds: int,
    dropout: float = 0.0,
) -> ClientLevelPlan:
    """The plan of a client-level private run; calibrates z when target_epsilon is set."""
    rate = sampled / num_clients
    z = cfg_privacy.noise_multiplier
    if cfg_privacy.target_epsilon is not None:
        z = calibrate_noise(
            cfg_privacy.target_epsilon,
            [account(rate, {1: rounds})],
            cfg_privacy.delta,
            cfg_privacy.accountant,
        )
    plan = ClientLevelPlan(cfg_privacy, z, rate, rounds, sampled, num_clients, dropout)
    plan.update_noise_multiplier  # noqa: B018 (raises a FedbenchError on an impossible split)
    return plan


def clip_upload(upload: Upload, clip: float) -> tuple[Upload, bool]:
    """u * min(1, C / ||u||) over all uploaded tensors together; and whether ||u|| <= C."""
    norm = math.sqrt(sum(float(squared_norm(tensors)) for tensors in upload.values()))
    scale = min(1.0, clip / norm) if norm > 0 else 1.0
    return {k: torch._foreach_mul(v, scale) for k, v in upload.items()}, norm <= clip


def server_generator(seed: int, round_idx: int) -> torch.Generator:
    """The server's noise stream of round r (CPU; the same numbers on every device)."""
    key = int(np.random.SeedSequence([seed, round_idx, _SERVER_NOISE_SALT]).generate_state(1)[0])
    return torch.Generator().manual_seed(key)


def noisy_mean(
    sums: dict[str, list[Tensor]],
    count: int,
    *,
    clip: float,
    noise_multiplier: float,
    generator: torch.Generator,
) -> dict[str, list[Tensor]]:
    """(sum + N(0, (noise_multiplier * clip)^2 I)) / count, every key in a fixed order."""
    std = noise_multiplier * clip
    out = {}
    for key in sorted(sums):
        noisy = []
        for t in sums[key]:
            noise = torch.randn(t.shape, generator=generator, dtype=torch.float64)
            noisy.append((t + (std * noise).to(t.device, t.dtype)) / count)
        out[key] = noisy
    return out


def next_clip(
    clip: float,
    unclipped: int,
    count: int,
    *,
    quantile: float,
    lr: float,
    count_noise: float,
    generator: torch.Generator,
) -> float:
    """Andrew et al.'s geometric update from the privatised fraction of unclipped updates."""
    noisy = (
        unclipped + count_noise * float(torch.randn((), generator=generator, dtype=torch.float64))
    ) / count
    return clip * math.exp(-lr * (noisy - quantile))


class ClientLevelRound:
    """One round's client-level mechanism: clips uploads as they arrive and privatises the
    round's sum; `clip` is the round's C and `new_clip` the next round's (adaptive)."""

    def __init__(
        self,
        plan: ClientLevelPlan,
        seed: int,
        round_idx: int,
        clip: float,
        public: frozenset[str] = frozenset(),
        nonnegative: frozenset[str] = frozenset(),
    ) -> None:
        self.plan = plan
        self.clip = clip
        #: Upload keys released as they are (`Algorithm.public_uploads`): not clipped, no noise.
        self.public = public
        #: Upload keys non-negative by construction (`Algorithm.nonnegative_uploads`): their
        #: noisy mean is clamped at 0 (post-processing: no privacy cost).
        self.nonnegative = nonnegative
        self.generator = server_generator(seed, round_idx)
        self.unclipped = 0
        self.count = 0
        self.new_clip = clip

    def add(self, upload: Upload) -> Upload:
        private = {k: v for k, v in upload.items() if k not in self.public}
        clipped, under = clip_upload(private, self.clip)
        self.unclipped += int(under)
        self.count += 1
        return {**upload, **clipped}

    def privatise(self, sums: dict[str, list[Tensor]]) -> dict[str, list[Tensor]]:
        # Public uploads (FedNova's tau_i) are averaged over the clients that sent them.
        public = {k: [t / self.count for t in v] for k, v in sums.items() if k in self.public}
        denominator = self.plan.denominator(self.count)
        mean = noisy_mean(
            {k: v for k, v in sums.items() if k not in self.public},
            denominator,
            clip=self.clip,
            noise_multiplier=self.plan.update_noise_multiplier,
            generator=self.generator,
        )
        for key in self.nonnegative & mean.keys():
            torch._foreach_clamp_min_(mean[key], 0.0)
        config = self.plan.config
        if config.adaptive_clip:
            self.new_clip = next_clip(
                self.clip,
                self.unclipped,
                denominator,
                quantile=config.target_quantile,
                lr=config.clip_lr,
                count_noise=self.plan.count_noise,
                generator=self.generator,
            )
        return {**mean, **public}
