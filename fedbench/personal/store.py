"""The per-client state store: every client's stored state (an algorithm's c_i, a personalised
method's head, BN statistics or full personal model), bounded in memory.

One mapping `client -> State` serves every executor (the round protocol reads and writes it,
fedbench.engine.protocol) and every algorithm. Without a bound it is a dict in memory, and a
checkpoint holds it as before. With `runtime.client_state_memory` (MiB) the states beyond
the bound go to disk, least recently written first, one file per state under the run
folder's `client_states/`, and are read back when their client trains or is evaluated: 1,000
clients of personal models fit a machine that holds only a few.

Resume is bit-exact: a spilled state's file is never overwritten (each write takes a new
name), the checkpoint records the in-memory states and the file of every spilled one, and a
file is deleted only once no checkpoint and no live entry names it. A kill after the
checkpoint leaves the files it names in place; a resumed run reads them back exactly.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from fedbench.algorithms.base import Algorithm, State
from fedbench.algorithms.personal import PersonalAlgorithm
from fedbench.config import RunConfig
from fedbench.files import write_file


def map_tensors(state: Any, fn: Callable[[Tensor], Tensor]) -> Any:
    """A client state with `fn` applied to every tensor (non-tensor leaves kept as they are)."""
    if isinstance(state, Tensor):
        return fn(state)
    if isinstance(state, dict):
        return {k: map_tensors(v, fn) for k, v in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(map_tensors(v, fn) for v in state)
    return state


def to_device(state: Any, device: torch.device) -> Any:
    """A client state with every tensor on `device`."""
    return map_tensors(state, lambda t: t.to(device))


#: The spill folder's name inside the run folder.
SPILL_FOLDER = "client_states"


def state_bytes(state: Any) -> int:
    """The bytes of every tensor of a state (nested dicts / lists / tuples)."""
    total = 0

    def count(t: Tensor) -> Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    map_tensors(state, count)
    return total


class ClientStore(MutableMapping[int, State]):
    """Client states kept on `device`, up to `bound` bytes (None: no bound); beyond it spilled
    to `folder` (module docstring)."""

    def __init__(
        self,
        device: torch.device | None = None,
        bound: int | None = None,
        folder: Path | None = None,
    ) -> None:
        if bound is not None and folder is None:
            raise ValueError("a bounded client store needs a folder to spill to")
        self.device = device
        self.bound = bound
        self.folder = folder
        self._memory: OrderedDict[int, State] = OrderedDict()
        self._sizes: dict[int, int] = {}
        self._spilled: dict[int, str] = {}
        #: The files the last checkpoint names (kept until a later checkpoint drops them).
        self._checkpointed: set[str] = set()
        self._writes = 0
        #: The most bytes held in memory at once (for the memory note, `fedbench.personal`).
        self.peak_bytes = 0

    # --- the mapping ---------------------------------------------------------------------------
    def __getitem__(self, client: int) -> State:
        if client in self._memory:
            return self._memory[client]
        if client in self._spilled:
            assert self.folder is not None
            loaded = torch.load(self.folder / self._spilled[client], weights_only=True)
            return loaded if self.device is None else to_device(loaded, self.device)
        raise KeyError(client)

    def __setitem__(self, client: int, state: State) -> None:
        self._forget(client)
        self._memory[client] = state
        self._sizes[client] = state_bytes(state)
        self._spill_beyond_bound()
        self.peak_bytes = max(self.peak_bytes, self.memory_bytes)

    def __delitem__(self, client: int) -> None:
        if client not in self._memory and client not in self._spilled:
            raise KeyError(client)
        self._forget(client)

    def __iter__(self) -> Iterator[int]:
        return iter(sorted({*self._memory, *self._spilled}))

    def __len__(self) -> int:
        return len(self._memory) + len(self._spilled)

    def __contains__(self, client: object) -> bool:
        return client in self._memory or client in self._spilled

    # --- memory --------------------------------------------------------------------------------
    @property
    def memory_bytes(self) -> int:
        return sum(self._sizes.values())

    @property
    def spilled(self) -> int:
        """How many states are on disk now."""
        return len(self._spilled)

    def _forget(self, client: int) -> None:
        self._memory.pop(client, None)
        self._sizes.pop(client, None)
        name = self._spilled.pop(client, None)
        if name is not None:
            self._delete_unreferenced(name)

    def _spill_beyond_bound(self) -> None:
        """Write the least recently written states to disk until memory is within the bound
        (the newest state stays in memory, even alone above it)."""
        if self.bound is None:
            return
        while self.memory_bytes > self.bound and len(self._memory) > 1:
            client, state = self._memory.popitem(last=False)
            del self._sizes[client]
            self._spilled[client] = self._write(client, state)

    def _write(self, client: int, state: State) -> str:
        assert self.folder is not None
        self._writes += 1
        name = f"client{client}-w{self._writes}.pt"
        cpu = map_tensors(state, lambda t: t.detach().cpu())
        self.folder.mkdir(parents=True, exist_ok=True)
        write_file(self.folder / name, lambda fh: torch.save(cpu, fh))
        return name

    def _delete_unreferenced(self, name: str) -> None:
        if self.folder is not None and name not in self._checkpointed:
            (self.folder / name).unlink(missing_ok=True)

    # --- checkpoints -----------------------------------------------------------------------------
    def checkpoint_entries(self) -> dict[str, Any]:
        """What a checkpoint holds of the store: `clients` (the in-memory states, by client;
        exactly the dict an unbounded store's checkpoint always held) and, where states are
        spilled, `clients_spilled` (client -> file) and the write counter."""
        entries: dict[str, Any] = {"clients": dict(self._memory)}
        if self._spilled:
            entries["clients_spilled"] = dict(self._spilled)
            entries["clients_writes"] = self._writes
        return entries

    def checkpointed(self) -> None:
        """Call after the checkpoint of `checkpoint_entries` is on disk: the files only the
        previous checkpoint named are deleted."""
        previous = self._checkpointed
        self._checkpointed = set(self._spilled.values())
        for name in previous - self._checkpointed:
            self._delete_unreferenced(name)

    def restore(self, entries: dict[str, Any]) -> None:
        """The store as a checkpoint's `checkpoint_entries` left it."""
        self._memory.clear()
        self._sizes.clear()
        for client, state in entries["clients"].items():
            moved = state if self.device is None else to_device(state, self.device)
            self._memory[int(client)] = moved
            self._sizes[int(client)] = state_bytes(moved)
        self._spilled = {int(k): str(v) for k, v in entries.get("clients_spilled", {}).items()}
        self._writes = int(entries.get("clients_writes", 0))
        self._checkpointed = set(self._spilled.values())
        if self.folder is not None and self.folder.is_dir():
            # Files written after the checkpoint (by the killed pass) are not needed.
            for path in self.folder.glob("client*-w*.pt"):
                if path.name not in self._checkpointed:
                    path.unlink(missing_ok=True)
        self._spill_beyond_bound()


def client_store(cfg: RunConfig, device: torch.device, run_folder: Path) -> ClientStore:
    """The run's store: bounded by `runtime.client_state_memory` (MiB), spilling to the run
    folder's client_states/."""
    mib = cfg.runtime.client_state_memory
    if mib is None:
        return ClientStore(device)
    return ClientStore(device, int(mib * 2**20), run_folder / SPILL_FOLDER)


def store_choice(cfg: RunConfig, algorithm: Algorithm, num_clients: int) -> tuple[str, str] | None:
    """The plan's `client_state_store` entry (value, reason): where the per-client states
    live, for a run that keeps personal state or bounds the store (None: no entry, as before
    for the global algorithms)."""
    mib = cfg.runtime.client_state_memory
    personal = isinstance(algorithm, PersonalAlgorithm) and algorithm.personalises
    if mib is None and not personal:
        return None
    where = f"runtime.client_state_device {cfg.runtime.client_state_device}"
    if not personal:
        return "spill", f"runtime.client_state_memory {mib:g} MiB, beyond it {SPILL_FOLDER}/"
    assert isinstance(algorithm, PersonalAlgorithm)
    need = num_clients * algorithm.stored_floats() * 4 / 2**20  # fp32 states
    if mib is None:
        return "memory", f"no runtime.client_state_memory: {need:.1f} MiB at most ({where})"
    if need <= mib:
        return "memory", f"{need:.1f} MiB at most fits runtime.client_state_memory {mib:g} MiB"
    return "spill", (
        f"{need:.1f} MiB at most > runtime.client_state_memory {mib:g} MiB: the least recently "
        f"written states go to the run folder's {SPILL_FOLDER}/"
    )
