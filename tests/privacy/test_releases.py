"""The accountant counts what the mechanism releases: every registered DP algorithm trained with
its privatised releases counted as they happen (the per-sample mechanism's and the client-level
server's noisy sums wrapped), against the accountant's count, noise and shared batches."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import torch

import fedbench.engine.client as client_module
import fedbench.engine.loop as loop_module
import fedbench.privacy.client_level as client_level_module
from fedbench.algorithms import ALGORITHMS
from fedbench.algorithms.personal import PersonalAlgorithm
from fedbench.config import load_run_config
from fedbench.engine import train
from fedbench.engine.setup import prepare_run
from fedbench.privacy.accounting import account
from fedbench.privacy.client_level import ClientLevelPlan
from fedbench.privacy.mechanism import PrivateGradient
from fedbench.privacy.plan import PrivacyPlan

#: A federation of a second or two: 3 rounds (FAFED's initial exchange and two more), clients
#: of different sizes (a Dirichlet split), 2 of 4 per round, 3 local steps.
SMALL = [
    "model.name=logreg",
    "partition.clients=4",
    "fl.rounds=3",
    "fl.participation=0.5",
    "fl.local_steps=3",
    "fl.batch_size=8",
    "eval.every=3",
    "eval.train_subset=50",
    "privacy.noise_multiplier=0.9",
    "privacy.clip=1.0",
]


def _settings(name: str) -> list[str]:
    """SMALL, with what a personalised method needs: its clients' own test data and, for one
    that splits the model into a body and a head, a model with a body (logreg is all head)."""
    cls = ALGORITHMS.get(name)
    extra = []
    if issubclass(cls, PersonalAlgorithm):
        extra.append("partition.client_test_fraction=0.25")
        if cls.uses_head:
            extra.append("model.name=mlp")
    return [*SMALL, *extra, f"algorithm.name={name}"]


SAMPLE_LEVEL = sorted(name for name, cls in ALGORITHMS.items() if cls.requires_privacy)
CLIENT_LEVEL = sorted(
    name
    for name, cls in ALGORITHMS.items()
    if not cls.requires_privacy and cls.supports_privacy and not cls.uses_client_uploads
)


def test_the_lists_cover_every_algorithm_with_a_private_mechanism() -> None:
    # Every algorithm either has a dp_ twin (sample level) or is one; client level takes every
    # algorithm but those that read each client's upload (which it does not release).
    assert "dp_fedsam" in SAMPLE_LEVEL and "dp_fafed" in SAMPLE_LEVEL
    assert "fedsam" in CLIENT_LEVEL and "fafed" in CLIENT_LEVEL
    twins = {name.removeprefix("dp_") for name in SAMPLE_LEVEL}
    bases = [n for n, c in ALGORITHMS.items() if c.supports_privacy and not c.requires_privacy]
    assert bases and all(name in twins for name in bases)


class SampleLevelCount:
    """Each PrivateGradient call, filed under (client, round, local step): the step from the
    engine's per-step gradient oracle, the client and round from the call that trains it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.client_round: tuple[int, int] = (-1, -1)
        #: {(client, round): [[batch of each call] per step]}
        self.steps: dict[tuple[int, int], list[list[torch.Tensor]]] = defaultdict(list)
        self.noise: set[tuple[float, float]] = set()
        run_client, oracle, call = (
            loop_module.run_client,
            client_module._gradient_oracle,
            PrivateGradient.__call__,
        )

        def counted_run_client(*args: Any, client: int, info: Any, **kwargs: Any) -> Any:
            self.client_round = (client, info.round_index)
            return run_client(*args, client=client, info=info, **kwargs)

        def counted_oracle(*args: Any, **kwargs: Any) -> Any:
            self.steps[self.client_round].append([])
            return oracle(*args, **kwargs)

        def counted_call(mech: PrivateGradient, x: torch.Tensor, *args: Any, **kw: Any) -> Any:
            self.steps[self.client_round][-1].append(x)
            self.noise.add((mech.noise_multiplier, mech.clip))
            return call(mech, x, *args, **kw)

        monkeypatch.setattr(loop_module, "run_client", counted_run_client)
        monkeypatch.setattr(client_module, "_gradient_oracle", counted_oracle)
        monkeypatch.setattr(PrivateGradient, "__call__", counted_call)

    def releases(self, num_clients: int) -> list[dict[int, int]]:
        """{g: steps that released g gradients} per client, over the whole run."""
        per_client: list[Counter[int]] = [Counter() for _ in range(num_clients)]
        for (client, _), steps in self.steps.items():
            for batches in steps:
                # The g gradients of one step are taken on the step's one batch: the
                # accountant's one subsampled release of g gradients.
                assert all(b is batches[0] for b in batches)
                if batches:
                    per_client[client][len(batches)] += 1
        return [dict(c) for c in per_client]


@pytest.mark.parametrize("name", SAMPLE_LEVEL)
def test_sample_level_accountant_counts_what_each_dp_algorithm_privatises(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = load_run_config(None, [*_settings(name), "privacy.sampling=poisson"])
    plan = prepare_run(cfg).privacy
    assert isinstance(plan, PrivacyPlan)
    counted = SampleLevelCount(monkeypatch)
    assert train(cfg, tmp_path).status == "completed"
    released = counted.releases(plan.num_clients)
    accounts = plan.accounts()
    assert accounts == [account(q, r) for q, r in zip(plan.rates, released, strict=True)]
    assert sum(a.count for a in accounts) > 0
    assert counted.noise == {(plan.noise_multiplier, plan.config.clip)}
    cls = ALGORITHMS.get(name)
    if cls.gradients_per_step == 2:  # DP-FedSAM, DP-FAFED: pairs on one batch, not 2K steps
        assert any(2 in r for r in released)
        assert all(set(a.releases) <= {(1, 1), *[(2, n) for n in range(1, 10)]} for a in accounts)


@pytest.mark.parametrize("name", CLIENT_LEVEL)
def test_client_level_accountant_counts_each_rounds_noisy_mean(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = load_run_config(None, [*_settings(name), "privacy.level=client"])
    plan = prepare_run(cfg).privacy
    assert isinstance(plan, ClientLevelPlan)
    noises: list[float] = []
    noisy_mean = client_level_module.noisy_mean

    def counted(*args: Any, noise_multiplier: float, **kwargs: Any) -> Any:
        noises.append(noise_multiplier)
        return noisy_mean(*args, noise_multiplier=noise_multiplier, **kwargs)

    monkeypatch.setattr(client_level_module, "noisy_mean", counted)
    assert train(cfg, tmp_path).status == "completed"
    # One Gaussian release of the round's clipped sum per round, every client accounted at q.
    assert plan.account() == account(plan.rate, {1: len(noises)})
    assert len(noises) == cfg.fl.rounds
    assert set(noises) == {plan.noise_multiplier}


def test_a_rule_that_privatises_more_than_it_declares_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DP-FedSAM declaring one gradient per step while its step takes two: the run fails
    # rather than report the smaller epsilon.
    cls = ALGORITHMS.get("dp_fedsam")
    monkeypatch.setattr(cls, "round_gradients", classmethod(lambda c, r, k, params=None: {1: k}))
    cfg = load_run_config(None, [*SMALL, "algorithm.name=dp_fedsam"])
    with pytest.raises(RuntimeError, match=r"privatised \{2: 3\} .* declares \{1: 3\}"):
        train(cfg, tmp_path)
