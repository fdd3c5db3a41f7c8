"""The per-client state store: bounded memory, spilled states read back exactly, checkpoint
entries that restore the store, and spill files kept exactly as long as something names them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedbench.personal.store import ClientStore, state_bytes


def state(value: float) -> dict[str, list[torch.Tensor]]:
    return {"personal": [torch.full((4,), value), torch.full((2, 2), -value)]}


def same(a: dict, b: dict) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a["personal"], b["personal"], strict=True))


def test_unbounded_store_is_a_dict(tmp_path: Path) -> None:
    store = ClientStore()
    store[3] = state(1.0)
    store[1] = state(2.0)
    assert list(store) == [1, 3] and len(store) == 2 and 3 in store and 0 not in store
    assert store.get(0) is None and store.spilled == 0
    assert store.checkpoint_entries().keys() == {"clients"}  # what checkpoints always held
    del store[3]
    assert list(store) == [1]


def test_bound_spills_the_least_recently_written(tmp_path: Path) -> None:
    one = state_bytes(state(0.0))
    assert one == 8 * 4  # 8 float32 values
    store = ClientStore(bound=2 * one, folder=tmp_path)
    for c in range(5):
        store[c] = state(float(c))
    assert store.memory_bytes == 2 * one and store.spilled == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "client0-w1.pt",
        "client1-w2.pt",
        "client2-w3.pt",
    ]
    for c in range(5):
        assert same(store[c], state(float(c)))  # read back exactly
    store[0] = state(10.0)  # rewritten: its old file goes (no checkpoint names it)
    assert not (tmp_path / "client0-w1.pt").exists()
    assert same(store[0], state(10.0))
    assert store.peak_bytes <= 2 * one


def test_checkpoint_restore_and_file_lifetime(tmp_path: Path) -> None:
    one = state_bytes(state(0.0))
    store = ClientStore(bound=one, folder=tmp_path)
    store[0], store[1], store[2] = state(0.0), state(1.0), state(2.0)
    entries = store.checkpoint_entries()
    saved = {k: (dict(v) if isinstance(v, dict) else v) for k, v in entries.items()}
    store.checkpointed()
    assert saved["clients_spilled"] == {0: "client0-w1.pt", 1: "client1-w2.pt"}
    # After the checkpoint: client 0 written again; its checkpointed file must stay.
    store[0] = state(5.0)
    assert (tmp_path / "client0-w1.pt").exists()
    # A kill now, then resume from the checkpoint: the store as it was then.
    resumed = ClientStore(bound=one, folder=tmp_path)
    resumed.restore(saved)
    for c in range(3):
        assert same(resumed[c], state(float(c)))
    # Files only the killed pass wrote are gone; the checkpoint's are kept.
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {"client0-w1.pt", "client1-w2.pt"}
    # The next checkpoint no longer names client 0's old file: it is deleted then.
    resumed[0] = state(7.0)
    resumed.checkpoint_entries()
    resumed.checkpointed()
    assert not (tmp_path / "client0-w1.pt").exists()
    assert same(resumed[0], state(7.0))


def test_fresh_start_clears_leftovers(tmp_path: Path) -> None:
    (tmp_path / "client4-w9.pt").write_bytes(b"left by a killed run")
    store = ClientStore(bound=1, folder=tmp_path)
    store.restore({"clients": {}})
    assert list(tmp_path.iterdir()) == []


def test_a_bound_needs_a_folder() -> None:
    with pytest.raises(ValueError, match="folder"):
        ClientStore(bound=10)
