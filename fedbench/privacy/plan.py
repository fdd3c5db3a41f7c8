"""What the engine needs to run a config privately: the resolved noise multiplier (calibrated
when `target_epsilon` is set), the accountant's inputs, and the per-step gradient mechanism."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal, cast

import torch
from torch import Tensor, nn

from fedbench.algorithms.base import Algorithm
from fedbench.config import PrivacyConfig, RunConfig
from fedbench.errors import FedbenchError
from fedbench.privacy.accounting import (
    calibrate_noise,
    client_epsilons,
    client_steps,
    sampling_rate,
    worst_epsilon,
)
from fedbench.privacy.client_level import ClientLevelPlan, client_level_plan
from fedbench.privacy.mechanism import Method, PrivateGradient, check_no_batchnorm
from fedbench.privacy.status import accounting_status
from fedbench.step import Objective


@dataclass(frozen=True)
class PrivacyPlan:
    """Sample-level DP (DP-SGD on every local gradient); client level: ClientLevelPlan."""

    config: PrivacyConfig
    #: sigma actually used: privacy.noise_multiplier, or the one calibrated to target_epsilon.
    noise_multiplier: float
    rates: list[float]
    schedule: Sequence[list[int]]
    local_steps: int
    #: Privatised gradients per local step (2 for DP-FedSAM).
    gradients_per_step: int
    batch_size: int
    #: Clients run K_i <= K steps (fl.local_steps_min) and are accounted K: epsilon is a bound.
    steps_vary: bool = False

    level: ClassVar[Literal["sample"]] = "sample"

    def accounting(self) -> dict[str, str]:
        """Which mechanism the accountant analysed and how the reported epsilon relates to the
        one that ran (fedbench.privacy.status): "accounting" is `exact`, `approximate` (may be
        understated) or `upper bound`, with its "direction" and "why"."""
        model = (
            f"per client, {self.local_steps * self.gradients_per_step} Poisson-subsampled "
            f"Gaussian steps at q_i = B/n_i per round it joins, noise multiplier "
            f"{self.noise_multiplier:.4g} ({self.config.accountant}); the worst client"
        )
        fewer = (
            "clients run K_i <= K steps (fl.local_steps_min) and are accounted K"
            if self.steps_vary
            else None
        )
        return accounting_status("sample", self.config.sampling, fewer).as_dict(model)

    @property
    def num_clients(self) -> int:
        return len(self.rates)

    def steps(self, rounds_done: int | None = None) -> list[int]:
        schedule = self.schedule if rounds_done is None else self.schedule[:rounds_done]
        return client_steps(schedule, self.num_clients, self.local_steps, self.gradients_per_step)

    def epsilon(self, rounds_done: int | None = None) -> float:
        """Worst client's epsilon after `rounds_done` rounds (default: the whole run)."""
        return worst_epsilon(
            self.noise_multiplier,
            self.rates,
            self.steps(rounds_done),
            self.config.delta,
            self.config.accountant,
        )

    def client_epsilons(self) -> list[float]:
        return client_epsilons(
            self.noise_multiplier,
            self.rates,
            self.steps(),
            self.config.delta,
            self.config.accountant,
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
    gradients_per_step: int = 1,
) -> PrivacyPlan:
    """Accountant inputs from the known-in-advance schedule; calibrates sigma if asked."""
    privacy = cfg.privacy
    if privacy is None:
        raise FedbenchError(f"algorithm {cfg.algorithm.name} needs a privacy section")
    rates = [sampling_rate(cfg.fl.batch_size, n) for n in client_sizes]
    sigma = privacy.noise_multiplier
    if privacy.target_epsilon is not None:
        steps = client_steps(schedule, len(client_sizes), cfg.fl.local_steps, gradients_per_step)
        sigma = calibrate_noise(
            privacy.target_epsilon, rates, steps, privacy.delta, privacy.accountant
        )
    return PrivacyPlan(
        config=privacy,
        noise_multiplier=sigma,
        rates=rates,
        schedule=schedule,
        local_steps=cfg.fl.local_steps,
        gradients_per_step=gradients_per_step,
        batch_size=cfg.fl.batch_size,
        steps_vary=cfg.fl.local_steps_min not in (None, cfg.fl.local_steps),
    )


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
    if cfg.privacy.level == "sample" and algorithm_cls.uses_full_gradient(cfg.algorithm):
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
    return make_plan(cfg, client_sizes, schedule, algorithm_cls.gradients_per_step)


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
