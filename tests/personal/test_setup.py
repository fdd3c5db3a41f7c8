"""Unseen clients (drawn once per partition, held out of the schedule) and the plan's
client_state_store entry."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from fedbench.algorithms import ALGORITHMS, ParamSpec
from fedbench.config import load_run_config
from fedbench.engine.schedule import client_schedule
from fedbench.personal.setup import unseen_clients
from fedbench.personal.store import store_choice

SPEC = ParamSpec(["w", "b"], [torch.Size([256, 1024]), torch.Size([256])], {})


def test_unseen_clients_are_a_function_of_the_partition_seed() -> None:
    assert unseen_clients(0.0, 100, 0) == []
    drawn = unseen_clients(0.1, 100, 0)
    assert len(drawn) == 10 and drawn == sorted(set(drawn)) and all(0 <= c < 100 for c in drawn)
    assert unseen_clients(0.1, 100, 0) == drawn  # the same for every method and run seed
    assert unseen_clients(0.1, 100, 1) != drawn
    assert len(unseen_clients(0.25, 10, 0)) == 3  # round(2.5) half up


def test_schedule_draws_only_members() -> None:
    members = tuple(c for c in range(20) if c not in (3, 7, 11, 19))
    schedule = replace(client_schedule(5, 50, 20, 4), members=members)
    for clients in schedule:
        assert len(clients) == 4 and set(clients) <= set(members)
    # Members drawn as clients 0..len-1 are drawn otherwise: the k-th member for draw k.
    same = client_schedule(5, 50, 16, 4)
    assert [[members.index(c) for c in clients] for clients in schedule] == list(same)


def cfg(*extra: str):
    return load_run_config(None, ["algorithm.name=local_only", *extra])


def test_store_choice() -> None:
    local = ALGORITHMS.get("local_only")
    alg = local(local.Params(), SPEC, num_clients=100)
    mib = 100 * (256 * 1024 + 256) * 4 / 2**20  # 100.1 MiB
    value, reason = store_choice(cfg(), alg, 100)
    assert value == "memory" and f"{mib:.1f} MiB at most" in reason
    value, reason = store_choice(cfg("runtime.client_state_memory=200"), alg, 100)
    assert value == "memory" and "fits" in reason
    value, reason = store_choice(cfg("runtime.client_state_memory=50"), alg, 100)
    assert value == "spill" and "> runtime.client_state_memory 50 MiB" in reason
    fedavg = ALGORITHMS.get("fedavg")
    plain = fedavg(fedavg.Params(), SPEC, num_clients=100)
    assert store_choice(load_run_config(None, ["algorithm.name=fedavg"]), plain, 100) is None
    bounded = load_run_config(None, ["algorithm.name=scaffold", "runtime.client_state_memory=8"])
    assert store_choice(bounded, plain, 100) == (
        "spill",
        "runtime.client_state_memory 8 MiB, beyond it client_states/",
    )


@pytest.mark.parametrize(
    ("name", "twin"),
    [
        ("local_only", True),
        ("fedavg_ft", True),
        ("ditto", True),
        ("fedbn", False),
        ("fedrod", False),
    ],
)
def test_dp_twins_only_where_the_privacy_is_stated(name: str, twin: bool) -> None:
    """A personalised method has a dp_ twin once its sample-level privacy is stated
    (docs/personalised.md); FedBN (BatchNorm) and FedRoD (class counts in every gradient) none."""
    assert (f"dp_{name}" in ALGORITHMS) is twin
