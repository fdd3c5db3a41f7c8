"""Partition properties: sizes, no sample twice, skew grows as alpha falls, reproducibility."""

import numpy as np
import pytest

from fedbench.config import PartitionConfig
from fedbench.data.partition import class_counts, describe, partition, write_partition
from fedbench.errors import FedbenchError

LABELS = np.repeat(np.arange(10), 100)  # 1000 samples, 10 balanced classes


def _skew(parts, labels):
    """Mean over clients of the largest class share."""
    return float(np.mean([np.bincount(labels[p], minlength=10).max() / len(p) for p in parts]))


@pytest.mark.parametrize("kind", ["dirichlet", "iid"])
def test_equal_sizes_and_no_sample_twice(kind):
    parts = partition(LABELS, PartitionConfig(kind=kind, alpha=0.3, clients=20), 10)
    assert [len(p) for p in parts] == [50] * 20
    used = np.concatenate(parts)
    assert len(np.unique(used)) == len(used) == 1000


def test_samples_per_client():
    parts = partition(LABELS, PartitionConfig(alpha=0.5, clients=10, samples_per_client=30), 10)
    assert [len(p) for p in parts] == [30] * 10
    assert len(np.unique(np.concatenate(parts))) == 300


def test_dirichlet_with_exhausted_classes_still_fills_clients():
    # 7 clients x 142 samples with alpha tiny: classes run out and draws renormalise.
    parts = partition(LABELS, PartitionConfig(alpha=0.01, clients=7), 10)
    assert [len(p) for p in parts] == [142] * 7
    assert len(np.unique(np.concatenate(parts))) == 994


@pytest.mark.parametrize("kind", ["dirichlet", "dirichlet_label"])
def test_skew_grows_as_alpha_falls(kind):
    skews = [
        _skew(partition(LABELS, PartitionConfig(kind=kind, alpha=a, clients=10), 10), LABELS)
        for a in (100.0, 1.0, 0.1)
    ]
    assert skews[0] < skews[1] < skews[2]
    assert skews[0] < 0.25 and skews[2] > 0.5


@pytest.mark.parametrize("kind", ["dirichlet", "dirichlet_label", "iid"])
def test_reproducible_and_seed_dependent(kind):
    a = partition(LABELS, PartitionConfig(kind=kind, clients=10, seed=3), 10)
    b = partition(LABELS, PartitionConfig(kind=kind, clients=10, seed=3), 10)
    c = partition(LABELS, PartitionConfig(kind=kind, clients=10, seed=4), 10)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_dirichlet_label_min_size_guard_terminates():
    parts = partition(LABELS, PartitionConfig(kind="dirichlet_label", alpha=0.001, clients=50), 10)
    assert min(len(p) for p in parts) >= 10
    used = np.concatenate(parts)
    assert len(np.unique(used)) == len(used) == 1000


def test_natural_partition_and_mismatch_error():
    ids = np.array([0, 0, 1, 2, 2, 2])
    parts = partition(np.zeros(6, dtype=int), PartitionConfig(kind="natural", clients=3), 1, ids)
    assert [p.tolist() for p in parts] == [[0, 1], [2], [3, 4, 5]]
    unsorted = np.array([2, 0, 1, 0, 2, 2])  # ids need not be grouped
    parts = partition(
        np.zeros(6, dtype=int), PartitionConfig(kind="natural", clients=3), 1, unsorted
    )
    assert [p.tolist() for p in parts] == [[1, 3], [2], [0, 4, 5]]
    with pytest.raises(FedbenchError, match=r"partition\.clients=3"):
        partition(np.zeros(6, dtype=int), PartitionConfig(kind="natural", clients=4), 1, ids)


def test_too_many_samples_is_an_error():
    with pytest.raises(FedbenchError, match="exceeds"):
        partition(LABELS, PartitionConfig(clients=10, samples_per_client=101), 10)


def test_describe_counts():
    parts = [np.array([0, 100, 101]), np.array([999])]
    info = describe(parts, LABELS, 10)
    assert info["clients"][0] == {"id": 0, "n": 3, "class_counts": [1, 2, 0, 0, 0, 0, 0, 0, 0, 0]}
    assert info["clients"][1]["class_counts"][9] == 1


def test_class_counts_are_partition_json_s():
    parts = [np.array([0, 100, 101]), np.array([999])]
    counts = class_counts(parts, LABELS, 10)
    assert counts.tolist() == [c["class_counts"] for c in describe(parts, LABELS, 10)["clients"]]
    assert counts[0].tolist() == [1, 2, 0, 0, 0, 0, 0, 0, 0, 0]


def test_partition_json_is_streamed_and_equals_describe(tmp_path):
    import json

    parts = [np.array([0, 100, 101]), np.array([999]), np.array([], dtype=np.int64)]
    write_partition(tmp_path / "partition.json", parts, LABELS, 10)
    text = (tmp_path / "partition.json").read_text()
    assert json.loads(text) == describe(parts, LABELS, 10)
    assert len(text.splitlines()) == 5  # one line per client


def test_dirichlet_equal_sizes_reuse_and_class_mix():
    # 20 clients x 100 samples = 2000 > 1000: FedDyn's scheme reuses samples instead of failing.
    cfg = PartitionConfig(kind="dirichlet_equal", alpha=0.3, clients=20, samples_per_client=100)
    parts = partition(LABELS, cfg, 10)
    assert [len(p) for p in parts] == [100] * 20
    used = np.concatenate(parts)
    # Each class pool is consumed cyclically: a class drawn D times uses min(D, 100) distinct
    # samples, and their use counts differ by at most one.
    uses = np.bincount(used, minlength=1000).reshape(10, 100)
    drawn = uses.sum(axis=1)
    assert drawn.max() > 100  # some class ran out and was reused
    assert ((uses > 0).sum(axis=1) == np.minimum(drawn, 100)).all()
    assert (uses.max(axis=1) - uses.min(axis=1) <= 1).all()


def test_dirichlet_equal_default_size_and_skew():
    parts = partition(LABELS, PartitionConfig(kind="dirichlet_equal", alpha=0.05, clients=10), 10)
    assert [len(p) for p in parts] == [100] * 10
    assert _skew(parts, LABELS) > 0.6
    again = partition(LABELS, PartitionConfig(kind="dirichlet_equal", alpha=0.05, clients=10), 10)
    assert all(np.array_equal(x, y) for x, y in zip(parts, again))


def test_shards_two_classes_per_client_equal_sizes_no_reuse():
    labels = np.repeat(np.arange(10), 60)  # 600 samples, 10 classes of 60
    cfg = PartitionConfig(kind="shards", clients=20, shards_per_client=2, seed=3)
    parts = partition(labels, cfg, 10)
    assert [len(p) for p in parts] == [30] * 20  # 600 / 20 per client, shards of 15
    flat = np.concatenate(parts)
    assert len(np.unique(flat)) == 600  # every sample used exactly once (no leftovers here)
    # 40 shards of 15 over label-sorted data: each shard lies inside one class (60 = 4 shards)
    assert all(len(np.unique(labels[p])) <= 2 for p in parts)
    assert sum(len(np.unique(labels[p])) == 2 for p in parts) >= 5  # the draw mixes classes
    again = partition(labels, cfg, 10)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))
    other = partition(labels, cfg.model_copy(update={"seed": 4}), 10)
    assert any(not np.array_equal(a, b) for a, b in zip(parts, other, strict=True))


def test_shards_leftovers_and_too_many_shards():
    labels = np.repeat(np.arange(3), 11)  # 33 samples
    parts = partition(labels, PartitionConfig(kind="shards", clients=4, shards_per_client=3), 3)
    assert [len(p) for p in parts] == [6] * 4  # size 8 -> shards of 2; 9 samples unused
    with pytest.raises(FedbenchError, match="shards_per_client 9 exceeds the 8 samples"):
        partition(labels, PartitionConfig(kind="shards", clients=4, shards_per_client=9), 3)


def test_shards_per_client_changes_the_run_id_of_shard_runs_only():
    from fedbench.config import RunConfig

    def digest(cfg: RunConfig) -> str:  # the hash; the readable prefix names set fields anyway
        return cfg.run_id().rsplit("-", 1)[1]

    assert digest(RunConfig()) == digest(RunConfig(partition={"shards_per_client": 5}))
    shards = RunConfig(partition={"kind": "shards"})
    assert digest(shards) != digest(RunConfig(partition={"kind": "shards", "shards_per_client": 3}))


def test_shards_with_few_samples_per_client_sample_within_shards_of_all_the_data():
    """McMahan et al. 2017 cut ALL the label-sorted data into N x s shards. 10 clients x 20
    samples of 1000 (10 classes of 100), 2 shards each: 20 shards of 50, each half of one
    class; a client keeps 10 samples of each of its 2 shards. Before the fix the split cut only
    the first 200 sorted samples: the federation held classes {0, 1} alone."""
    cfg = PartitionConfig(kind="shards", clients=10, shards_per_client=2, samples_per_client=20)
    parts = partition(LABELS, cfg, 10)
    assert [len(p) for p in parts] == [20] * 10
    flat = np.concatenate(parts)
    assert len(np.unique(flat)) == 200
    # every shard (half a class) is used once with 10 samples: 20 samples of every class
    assert np.bincount(LABELS[flat], minlength=10).tolist() == [20] * 10
    for p in parts:
        counts = np.bincount(LABELS[p], minlength=10)
        assert set(counts[counts > 0].tolist()) <= {10, 20}
    # the hand rule: the same permutations of the seeded generator, then 10 of each shard
    rng = np.random.default_rng(cfg.seed)
    shuffled = rng.permutation(1000)
    by_label = shuffled[np.argsort(LABELS[shuffled], kind="stable")]
    shards = by_label.reshape(20, 50)
    owners = rng.permutation(20).reshape(10, 2)
    keep = rng.permuted(np.tile(np.arange(50), (20, 1)), axis=1)[:, :10]
    expected = [np.sort(np.concatenate([shards[j][keep[j]] for j in own])) for own in owners]
    assert all(np.array_equal(a, b) for a, b in zip(parts, expected, strict=True))


def test_corrected_rules_change_the_run_ids_of_the_runs_they_change_only():
    """A finished run of an old rule must not be reused under the corrected one (issue 32):
    the corrected cases hash a `revised` entry; everything else keeps its id."""
    from fedbench.config import RunConfig

    def revised(**fields) -> list[str]:
        return RunConfig(**fields)._results_data().get("revised", [])

    assert revised() == []
    assert revised(algorithm={"name": "fednova"}) == []
    assert revised(partition={"kind": "shards"}) == []
    assert revised(partition={"kind": "shards", "samples_per_client": 20}) == ["shards-of-all-data"]
    assert revised(algorithm={"name": "fednova"}, fl={"local_steps_min": 2}) == [
        "fednova-public-tau"
    ]
    client = {"level": "client", "noise_multiplier": 1.0}
    assert revised(algorithm={"name": "fednova"}, privacy=client) == ["fednova-public-tau"]
    assert revised(algorithm={"name": "fedavg"}, privacy=client) == []
