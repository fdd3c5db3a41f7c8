"""What the engine needs to run a config privately: the resolved noise multiplier (calibrated
when `target_epsilon` is set), the accountant's inputs, and the per-step gradient mechanism."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal, cast

import torch
from torch import Tensor, nn

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.full_gradient import uses_full_gradient
from fedbench.config import PrivacyConfig, RunConfig
from fedbench.errors import FedbenchError
from fedbench.privacy.accounting import (
    Account,
    account,
    calibrate_noise,
    client_epsilons,
    release_noise,
    sampling_rate,
    worst_epsilon,
)
from fedbench.privacy.client_level import ClientLevelPlan, client_level_plan
from fedbench.privacy.mechanism import Method, PrivateGradient, check_no_batchnorm
from fedbench.privacy.status import accounting_status
from fedbench.step import Objective

#: Rounds of a client schedule drawn to count the rounds each client joins (one generator draw
#: a round, 30-90 us on a loaded 2-core machine: 10**5 rounds take 3-9 s). A longer schedule
#: with sampled clients is not drawn: every client is accounted in every round, an upper bound,
#: so that the accountant's time stays bounded whatever fl.rounds.
SCHEDULE_DRAW_LIMIT = 100_000


def releases_text(releases: Mapping[int, int], sigma: float) -> str:
    """`20 Poisson-subsampled Gaussian releases of a pair of gradients of one batch (noise
    multiplier sigma/sqrt(2) = 0.7778)`: what one round's {g: steps} releases, for a reader."""
    parts = []
    kind = "Poisson-subsampled Gaussian release"
    for g, count in sorted(releases.items()):
        if g <= 0 or count <= 0:
            continue
        plural = "s" if count != 1 else ""
        if g == 1:
            parts.append(f"{count} {kind}{plural} of one gradient (noise multiplier {sigma:.4g})")
            continue
        what = "a pair of gradients" if g == 2 else f"{g} gradients"
        parts.append(
            f"{count} {kind}{plural} of {what} of one batch (noise multiplier "
            f"sigma/sqrt({g}) = {release_noise(sigma, g):.4g})"
        )
    return ", ".join(parts) or "nothing"


@dataclass(frozen=True)
class PrivacyPlan:
    """Sample-level DP (DP-SGD on every local gradient); client level: ClientLevelPlan."""

    config: PrivacyConfig
    #: sigma actually used: privacy.noise_multiplier, or the one calibrated to target_epsilon.
    noise_multiplier: float
    rates: list[float]
    schedule: Sequence[list[int]]
    local_steps: int
    #: What a client privatises in each of the algorithm's initial rounds, then in every later
    #: round: {g: local steps that privatise g gradients of their batch}
    #: (`Algorithm.round_gradients` at K).
    initial_releases: tuple[Mapping[int, int], ...]
    round_releases: Mapping[int, int]
    batch_size: int
    #: Clients run K_i <= K steps (fl.local_steps_min) and are accounted K: epsilon is a bound.
    steps_vary: bool = False
    #: Every client joins every round (S = N, no dropout): the counts need no draw.
    everyone: bool = False
    #: The participation counted so far ({"rounds": r, "counts": [...]}): the engine asks
    #: for epsilon after every evaluated round, and each draws on from the last.
    _drawn: dict[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    level: ClassVar[Literal["sample"]] = "sample"

    @property
    def bounded(self) -> bool:
        """The schedule is too long to draw (SCHEDULE_DRAW_LIMIT): every client is accounted
        in every round."""
        return not self.everyone and len(self.schedule) > SCHEDULE_DRAW_LIMIT

    def releases_per_round(self) -> str:
        """What a client releases in a round it joins, for a reader (`releases_text`)."""
        later = releases_text(self.round_releases, self.noise_multiplier)
        if not self.initial_releases:
            return later
        first = "; ".join(
            f"round {r}: {releases_text(rel, self.noise_multiplier)}"
            for r, rel in enumerate(self.initial_releases)
        )
        return f"{first}; later rounds: {later}"

    def accounting(self) -> dict[str, str]:
        """Which mechanism the accountant analysed and how the reported epsilon relates to the
        one that ran (fedbench.privacy.status): "accounting" is `exact`, `approximate` (may be
        understated) or `upper bound`, with its "direction" and "why"."""
        model = (
            f"per client and round it joins: {self.releases_per_round()}, at q_i = B/n_i "
            f"({self.config.accountant}); the worst client"
        )
        less = []
        if self.steps_vary:
            less.append("clients run K_i <= K steps (fl.local_steps_min) and are accounted K")
        if self.bounded:
            less.append(
                f"the schedule of {len(self.schedule):,} rounds is longer than the "
                f"{SCHEDULE_DRAW_LIMIT:,} that are drawn to count who joins: every client is "
                "accounted in every round"
            )
        fewer = "; ".join(less) or None
        return accounting_status("sample", self.config.sampling, fewer).as_dict(model)

    @property
    def num_clients(self) -> int:
        return len(self.rates)

    def _later_counts(self, rounds: int) -> list[int]:
        """The rounds in [initial rounds, rounds) each client joins: drawn from the schedule
        (on from the last count), or all of them (`everyone`, `bounded`)."""
        first = min(len(self.initial_releases), rounds)
        if self.everyone or self.bounded:
            return [rounds - first] * self.num_clients
        drawn = self._drawn
        if drawn.get("rounds", rounds + 1) > rounds:
            drawn["rounds"], drawn["counts"] = first, [0] * self.num_clients
        counts: list[int] = drawn["counts"]
        for r in range(drawn["rounds"], rounds):
            for c in self.schedule[r]:
                counts[c] += 1
        drawn["rounds"] = rounds
        return list(counts)

    def accounts(self, rounds_done: int | None = None) -> list[Account]:
        """What each client has released after `rounds_done` rounds (default: the whole run)."""
        rounds = len(self.schedule) if rounds_done is None else min(rounds_done, len(self.schedule))
        per_client: list[dict[int, int]] = [{} for _ in self.rates]
        for r, releases in enumerate(self.initial_releases[:rounds]):
            joined = range(self.num_clients) if self.everyone else self.schedule[r]
            for c in joined:
                for g, count in releases.items():
                    per_client[c][g] = per_client[c].get(g, 0) + count
        for c, joins in enumerate(self._later_counts(rounds)):
            for g, count in self.round_releases.items():
                per_client[c][g] = per_client[c].get(g, 0) + count * joins
        return [account(q, rel) for q, rel in zip(self.rates, per_client, strict=True)]

    def epsilon(self, rounds_done: int | None = None) -> float:
        """Worst client's epsilon after `rounds_done` rounds (default: the whole run)."""
        return worst_epsilon(
            self.noise_multiplier,
            self.accounts(rounds_done),
            self.config.delta,
            self.config.accountant,
        )

    def client_epsilons(self) -> list[float]:
        return client_epsilons(
            self.noise_multiplier, self.accounts(), self.config.delta, self.config.accountant
        )

    def mechanism(
        self,
        model: nn.Module,
        params: list[Tensor],
        autocast: torch.dtype | None = None,
        objective: Objective | None = None,
        *,
        method: str,
        strict: bool,
    ) -> PrivateGradient:
        """The run's mechanism with the clipping method its execution plan chose (`strict`:
        asked by name, so a batch size where it is not exact is an error, not vmap)."""
        return PrivateGradient(
            model,
            params,
            noise_multiplier=self.noise_multiplier,
            clip=self.config.clip,
            batch_size=self.batch_size,
            autocast=autocast,
            method=cast(Method, method),
            strict=strict,
            objective=objective,
        )


def make_plan(
    cfg: RunConfig,
    client_sizes: Sequence[int],
    schedule: Sequence[list[int]],
    algorithm_cls: type[Algorithm] | None = None,
    everyone: bool = False,
) -> PrivacyPlan:
    """Accountant inputs from the known-in-advance schedule and what `algorithm_cls` (default:
    cfg's algorithm) privatises in a round; calibrates sigma if asked. `everyone`: every round
    of `schedule` holds every client (its counts need no draw)."""
    privacy = cfg.privacy
    if privacy is None:
        raise FedbenchError(f"algorithm {cfg.algorithm.name} needs a privacy section")
    if algorithm_cls is None:
        from fedbench.algorithms import ALGORITHMS

        algorithm_cls = ALGORITHMS.get(cfg.algorithm.name)
    k = cfg.fl.local_steps
    plan = PrivacyPlan(
        config=privacy,
        noise_multiplier=privacy.noise_multiplier,
        rates=[sampling_rate(cfg.fl.batch_size, n) for n in client_sizes],
        schedule=schedule,
        local_steps=k,
        initial_releases=tuple(
            algorithm_cls.round_gradients(r, k, cfg.algorithm)
            for r in range(algorithm_cls.initial_rounds)
        ),
        round_releases=algorithm_cls.round_gradients(
            algorithm_cls.initial_rounds, k, cfg.algorithm
        ),
        batch_size=cfg.fl.batch_size,
        steps_vary=cfg.fl.local_steps_min not in (None, cfg.fl.local_steps),
        everyone=everyone,
    )
    if privacy.target_epsilon is None:
        return plan
    sigma = calibrate_noise(
        privacy.target_epsilon, plan.accounts(), privacy.delta, privacy.accountant
    )
    return replace(plan, noise_multiplier=sigma)


def plan_privacy(
    cfg: RunConfig,
    model: nn.Module,
    algorithm_cls: type[Algorithm],
    client_sizes: Sequence[int],
    schedule: Sequence[list[int]],
    sampled: int,
) -> PrivacyPlan | ClientLevelPlan | None:
    """None for a non-private run; else checks the model and builds the plan (setup hook)."""
    if cfg.privacy is None:
        if algorithm_cls.requires_privacy:
            raise FedbenchError(
                f"algorithm {cfg.algorithm.name} needs a privacy section "
                "(e.g. --set privacy.noise_multiplier=1.0)"
            )
        return None
    check_no_batchnorm(model, cfg.model.name, cfg.privacy.level)
    if cfg.privacy.level == "sample" and algorithm_cls.uses_class_counts:
        raise FedbenchError(
            f"{cfg.algorithm.name} reads each client's class counts in every gradient (its "
            "balanced softmax), which sample-level DP does not privatise; use privacy.level client"
        )
    if cfg.privacy.level == "sample" and not algorithm_cls.supports_privacy:
        # No dp_ twin: the rule was never checked against privatised gradients (MOON's
        # contrastive term is not in the per-sample loss; a personalised method that has not
        # stated what its personal part's privacy is), so an epsilon would cover an unknown
        # computation.
        raise FedbenchError(
            f"algorithm {cfg.algorithm.name} states no sample-level privacy (it has no dp_ "
            "twin, see docs/privacy.md), so fedbench cannot say what an epsilon would cover; "
            "use privacy.level client or another algorithm"
        )
    if cfg.privacy.level == "sample" and uses_full_gradient(algorithm_cls, cfg.algorithm):
        raise FedbenchError(
            f"{cfg.algorithm.name}'s full-data gradient pass (full_batch_gradient) is not "
            "privatised by sample-level DP; set algorithm.full_batch_gradient false"
        )
    return resolve_plan(cfg, algorithm_cls, client_sizes, schedule, sampled)


def resolve_plan(
    cfg: RunConfig,
    algorithm_cls: type[Algorithm],
    client_sizes: Sequence[int],
    schedule: Sequence[list[int]],
    sampled: int,
) -> PrivacyPlan | ClientLevelPlan:
    """The privacy plan of `privacy.level`: sample (DP-SGD accounting per client from the
    schedule) or client (one sampled Gaussian release per round at rate S / N)."""
    if cfg.privacy is not None and cfg.privacy.level == "client":
        return client_plan(cfg, algorithm_cls, len(client_sizes), sampled)
    # Both callers draw `schedule` from cfg: S = N without dropout puts everyone in every round.
    everyone = sampled == len(client_sizes) and cfg.fl.dropout == 0
    return make_plan(cfg, client_sizes, schedule, algorithm_cls, everyone)


def client_plan(
    cfg: RunConfig, algorithm_cls: type[Algorithm], num_clients: int, sampled: int
) -> ClientLevelPlan:
    """The client-level plan, after checking that the algorithm's server step can be fed the
    privatised mean alone."""
    assert cfg.privacy is not None
    name = cfg.algorithm.name
    if algorithm_cls.requires_privacy:
        raise FedbenchError(
            f"privacy.level client privatises the clients' updates, not their gradients: use "
            f"{name.removeprefix('dp_')} (not {name}) with privacy.level client"
        )
    if algorithm_cls.uses_client_uploads:
        raise FedbenchError(
            f"algorithm {name} reads every client's upload, which client-level DP does not "
            "release; use privacy.level sample or another algorithm"
        )
    if cfg.algorithm.weighting != "uniform":
        raise FedbenchError(
            "privacy.level client needs algorithm.weighting uniform (sample weights would change "
            "each client's sensitivity)"
        )
    return client_level_plan(cfg.privacy, num_clients, sampled, cfg.fl.rounds, cfg.fl.dropout)
