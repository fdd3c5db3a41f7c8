"""Partition kinds come from the PARTITIONS registry: found by name, listed, suggested on a typo,
and validated when the run config is read."""

import numpy as np
import pytest

from fedbench.catalog import first_line
from fedbench.config import PartitionConfig, parse_run_config
from fedbench.data.partition import partition
from fedbench.errors import FedbenchError
from fedbench.partitions import PARTITIONS, reads, settings_read

KINDS = ["dirichlet", "dirichlet_equal", "dirichlet_label", "iid", "natural", "shards"]


def test_every_kind_is_registered_with_a_description() -> None:
    assert list(PARTITIONS) == KINDS
    for name, split in PARTITIONS.items():
        assert len(first_line(split.__doc__)) > 15, name


def test_a_typo_in_the_kind_is_one_line_with_the_closest_name() -> None:
    with pytest.raises(FedbenchError) as err:
        parse_run_config({"partition": {"kind": "dirichelt"}})
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("unknown partition kind 'dirichelt'; did you mean 'dirichlet'")


def test_the_cli_exits_2_on_an_unknown_kind_and_lists_the_kinds(run_cli, tmp_path) -> None:
    code, _, err = run_cli("train", "--set", "partition.kind=dirichelt", "--out", str(tmp_path))
    assert code == 2 and "did you mean 'dirichlet'" in err
    assert not (tmp_path / "runs").exists()
    code, out, _ = run_cli("list", "partitions")
    assert code == 0
    for kind in KINDS:
        assert kind in out
    assert "McMahan et al. 2017" in out  # shards' first docstring line


def test_a_registered_kind_is_used_by_partition() -> None:
    """A kind added by a module is found by `partition.kind` (registered here, then removed)."""

    def every_other(task):
        """Client c gets samples c, c + N, c + 2N, ...: a deterministic round robin."""
        clients = task.settings.clients
        return [np.arange(c, task.n, clients) for c in range(clients)]

    with PARTITIONS.registered("round_robin", every_other):
        settings = PartitionConfig(kind="round_robin", clients=3)
        parts = partition(np.zeros(7, dtype=np.int64), settings, 1)
        assert [p.tolist() for p in parts] == [[0, 3, 6], [1, 4], [2, 5]]
    assert "round_robin" not in PARTITIONS
    with pytest.raises(FedbenchError, match="unknown partition kind 'round_robin'"):
        PartitionConfig(kind="round_robin")


def test_kind_parameters_keep_the_run_ids() -> None:
    """shards_per_client is hashed only under kind shards (run ids issued before it existed)."""
    base = parse_run_config({"partition": {"kind": "dirichlet"}})
    other = parse_run_config({"partition": {"kind": "dirichlet", "shards_per_client": 5}})
    assert base.config_hash() == other.config_hash()
    assert base.run_id() == "fedadamw-digits-cnn-s0-a8b5a65f78"  # the id before the registry
    a = parse_run_config({"partition": {"kind": "shards", "shards_per_client": 2}})
    b = parse_run_config({"partition": {"kind": "shards", "shards_per_client": 5}})
    assert a.config_hash() != b.config_hash()
    # The id a shards run had while alpha was hashed for every kind (RunFolder.for_config
    # still finds runs filed under it).
    assert a.run_id(legacy=True) == "fedadamw-split-shards-digits-cnn-s0-1b9b1d8552"
    assert a.run_id() == "fedadamw-split-shards-digits-cnn-s0-2795be8dde"


@pytest.mark.parametrize("kind", ["shards", "iid"])
def test_a_setting_the_kind_does_not_read_neither_names_nor_hashes_its_runs(kind) -> None:
    """A shards run's id named `dir0.1`, an alpha the split never reads."""
    a = parse_run_config({"partition": {"kind": kind, "alpha": 0.1}})
    b = parse_run_config({"partition": {"kind": kind, "alpha": 0.6}})
    assert a.run_id() == b.run_id() and "dir" not in a.run_id()
    assert "alpha" not in a.acting_data()["partition"]
    assert "dir0.1" in a.run_id(legacy=True)  # the id it had before
    dirichlet = parse_run_config({"partition": {"kind": "dirichlet", "alpha": 0.1}})
    assert "dir0.1" in dirichlet.run_id() and dirichlet.run_id() == dirichlet.run_id(legacy=True)
    assert dirichlet.run_id() != parse_run_config({"partition": {"alpha": 0.6}}).run_id()


def test_reads_declares_only_kind_settings() -> None:
    with pytest.raises(ValueError, match="not among"):
        reads("clients")
    assert settings_read(PARTITIONS.get("shards")) == {"shards_per_client"}
    assert settings_read(PARTITIONS.get("dirichlet")) == {"alpha"}
