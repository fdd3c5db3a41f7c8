"""Schedules are drawn when used, with the values an up-front draw gives: the clients of a round,
a client's batches (fixed-size and Poisson), and a plan's size is checked before it is built.
A tiny config (fl.rounds or fl.local_steps = 10**9, --seeds 100000000) no longer exhausts memory."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from fedbench.config import load_run_config
from fedbench.data.sampler import batch_indices
from fedbench.engine.schedule import client_schedule, participation_counts
from fedbench.engine.setup import prepare_run
from fedbench.privacy.mechanism import poisson_batches


def eager_batches(samples, local_steps, batch_size, generator):
    """fedbench's earlier batch order, drawn up front: the reference the lazy one must equal."""
    n = samples.numel()
    if batch_size == 0 or batch_size >= n:
        return samples.view(1, n).expand(local_steps, n)
    per_epoch = n // batch_size
    epochs = -(-local_steps // per_epoch)
    perms = torch.stack([torch.randperm(n, generator=generator) for _ in range(epochs)])
    return samples[perms[:, : per_epoch * batch_size].reshape(-1, batch_size)[:local_steps]]


def eager_poisson(samples, local_steps, rate, generator):
    masks = torch.rand(local_steps, samples.numel(), generator=generator) < rate
    return [samples[m] for m in masks]


def test_client_schedule_values_are_pinned() -> None:
    schedule = client_schedule(7, 50, 20, 5)
    assert schedule[:3] is not None and len(schedule) == 50
    assert list(schedule[:3]) == [[10, 11, 12, 15, 17], [2, 5, 13, 15, 16], [2, 4, 8, 16, 19]]
    assert schedule[2] == [2, 4, 8, 16, 19] and schedule[-1] == list(schedule)[-1]
    assert len(schedule[:10]) == 10 and list(schedule[:10]) == list(schedule)[:10]


def test_a_schedule_is_its_draws_settings_and_a_slice_is_the_shorter_schedule() -> None:
    # The first 4 rounds of a 6-round schedule are the 4-round schedule of the same settings.
    assert client_schedule(7, 6, 20, 5)[:4] == client_schedule(7, 4, 20, 5)
    assert client_schedule(7, 6, 20, 5)[:4] != client_schedule(8, 4, 20, 5)
    assert client_schedule(7, 4, 20, 5, dropout=0.5) != client_schedule(7, 4, 20, 5)


def test_a_billion_rounds_cost_nothing_up_front() -> None:
    start = time.perf_counter()
    schedule = client_schedule(3, 10**9, 100, 10)
    assert len(schedule) == 10**9 and len(schedule[10**9 - 1]) == 10
    assert schedule[5] == client_schedule(3, 6, 100, 10)[5]
    assert sum(participation_counts(schedule[:100], 100)) == 1000
    assert time.perf_counter() - start < 1.0


def test_prepare_run_of_a_billion_rounds_is_immediate() -> None:
    base = ["data.name=digits", "model.name=logreg", "partition.clients=4"]
    prepare_run(load_run_config(None, [*base, "fl.rounds=30"]))  # imports and data: once
    cfg = load_run_config(None, [*base, "fl.rounds=1000000000"])
    start = time.perf_counter()
    setup = prepare_run(cfg)
    assert len(setup.schedule) == 10**9 and len(setup.schedule[0]) == 1
    assert time.perf_counter() - start < 5.0  # under a second here; a loaded machine is slower


@pytest.mark.parametrize(
    ("n", "steps", "batch"), [(71, 10, 32), (10, 7, 3), (100, 5, 0), (50, 13, 64), (37, 200, 5)]
)
def test_batches_equal_the_up_front_draw_and_leave_the_generator_alike(n, steps, batch) -> None:
    samples = torch.arange(n) + 1000
    lazy_gen = torch.Generator().manual_seed(n * 1000 + steps)
    eager_gen = torch.Generator().manual_seed(n * 1000 + steps)
    order = batch_indices(samples, steps, batch, lazy_gen)
    expected = eager_batches(samples, steps, batch, eager_gen)
    # The generator goes on to augment the batches: it must be where the up-front draw left it.
    assert torch.equal(torch.rand(4, generator=lazy_gen), torch.rand(4, generator=eager_gen))
    assert order.shape == tuple(expected.shape) and len(order) == steps
    assert torch.equal(torch.stack([order[k] for k in range(steps)]), expected)


def test_batches_pinned_values() -> None:
    generator = torch.Generator().manual_seed(3)
    order = batch_indices(torch.arange(10) + 100, 5, 3, generator)
    assert [order[k].tolist() for k in range(5)] == [
        [106, 100, 103],
        [107, 108, 105],
        [101, 109, 102],
        [109, 108, 105],
        [103, 100, 106],
    ]


def test_without_advance_the_batches_are_the_same_and_cost_nothing_up_front() -> None:
    samples = torch.arange(71)
    advanced = batch_indices(samples, 50, 8, torch.Generator().manual_seed(5))
    lazy = batch_indices(samples, 50, 8, torch.Generator().manual_seed(5), advance=False)
    lazy_rows = [lazy[k] for k in range(50)]
    assert all(torch.equal(advanced[k], lazy_rows[k]) for k in range(50))
    batches = poisson_batches(samples, 9, 0.3, torch.Generator().manual_seed(5), advance=False)
    expected = eager_poisson(samples, 9, 0.3, torch.Generator().manual_seed(5))
    assert all(torch.equal(batches[k], expected[k]) for k in range(9))
    start = time.perf_counter()
    order = batch_indices(samples, 10**9, 8, torch.Generator().manual_seed(5), advance=False)
    poisson = poisson_batches(samples, 10**9, 0.3, torch.Generator().manual_seed(5), advance=False)
    assert torch.equal(order[0], lazy_rows[0]) and torch.equal(poisson[0], expected[0])
    assert time.perf_counter() - start < 1.0


def test_a_billion_local_steps_hold_one_epoch() -> None:
    samples = torch.arange(40)
    order = batch_indices(samples, 10**9, 0, torch.Generator().manual_seed(0))
    assert len(order) == 10**9 and torch.equal(order[10**9 - 1], samples)
    order = batch_indices(samples, 20_000, 20, torch.Generator().manual_seed(0))
    last = order[19_999]
    assert last.shape == (20,) and order._rows.shape == (2, 20)  # one epoch, not (K, B)
    with pytest.raises(IndexError):
        order[0]  # read in order: an earlier epoch is gone


@pytest.mark.parametrize(("n", "steps"), [(71, 10), (10, 7), (300, 40), (3, 500)])
def test_poisson_batches_equal_the_up_front_draw(n, steps) -> None:
    samples = torch.arange(n)
    lazy_gen = torch.Generator().manual_seed(n + steps)
    eager_gen = torch.Generator().manual_seed(n + steps)
    batches = poisson_batches(samples, steps, 0.2, lazy_gen)
    expected = eager_poisson(samples, steps, 0.2, eager_gen)
    assert torch.equal(torch.rand(4, generator=lazy_gen), torch.rand(4, generator=eager_gen))
    assert len(batches) == steps
    assert all(torch.equal(batches[k], expected[k]) for k in range(steps))


def test_absurd_seed_counts_are_refused_at_once(run_cli, tmp_path: Path) -> None:
    start = time.perf_counter()
    code, out, err = run_cli(
        "run", "table1", "--preset", "quick", "--seeds", "100000000", "--dry-run",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 2 and err.count("\n") == 1 and out == ""
    assert "32 cells x 100,000,000 seeds is 3,200,000,000 runs, more than the 100,000" in err
    assert time.perf_counter() - start < 5.0
    assert not any(tmp_path.iterdir())


def test_dry_run_cost_does_not_grow_with_rounds(run_cli, tmp_path: Path) -> None:
    start = time.perf_counter()
    code, out, err = run_cli(
        "run", "table1", "--preset", "quick", "--seeds", "1", "--methods", "FedAvg",
        "--set", "fl.rounds=1000000000", "--set", "fl.local_steps=1000000000", "--dry-run",
        "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0, err
    assert "4 runs (4 distinct), 16,000,000,000,000,000,000 client steps" in out
    assert time.perf_counter() - start < 10.0
