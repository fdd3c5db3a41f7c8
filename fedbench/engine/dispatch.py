"""What a piece of training asks of the device, counted on any device (the CPU included).

`OpCounter` is a TorchDispatchMode that counts every aten op dispatched while it is active: the
host's side of a step (each op is at least one kernel launch on a GPU), independent of how fast
the device is. It also counts the ops that read a device value back to the host (`SYNC_OPS`):
on a GPU each of them waits for every queued kernel, so one inside the local-step loop makes the
host wait once per step instead of running ahead. They are the same ops on the CPU, so a CPU test
can show that a round has none (`fedbench.engine.client` promises it).

Some host reads never reach the dispatcher on the CPU: `.tolist()`, `.numpy()` and `.cpu()`
read a CPU tensor's memory directly (on a GPU they copy it to the host first). `HostReads`, a
TorchFunctionMode, sees them where Python calls them; `torch.cuda.set_sync_debug_mode` covers
every kind on a GPU (tests marked cuda).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

#: aten ops that return a host value computed on the device, or whose output shape depends on
#: device data: each blocks the host until the device has caught up. `.item()`, `float(t)`,
#: `int(t)` and a tensor in a Python `if` dispatch `_local_scalar_dense` (the last through
#: `is_nonzero`); `.tolist()` reads the whole tensor with one `_local_scalar_dense` per element.
SYNC_OPS = frozenset(
    {
        "_local_scalar_dense",
        "is_nonzero",
        "item",
        "equal",
        "allclose",
        "nonzero",
        "masked_select",
        "unique",
        "_unique",
        "_unique2",
        "unique_consecutive",
        "unique_dim",
        "repeat_interleave",
        "_assert_async",
    }
)


class _Counts:
    """`counts` by name, for the two modes below (cooperative: the mode's __init__ runs too)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()


class OpCounter(_Counts, TorchDispatchMode):
    """Count the aten ops dispatched while active, by name (`aten.add_.Tensor` -> "add_")."""

    def __torch_dispatch__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        """Every op dispatched."""
        return sum(self.counts.values())

    @property
    def syncs(self) -> Counter[str]:
        """The ops among them that read a device value back (`SYNC_OPS`), by name."""
        return Counter({name: n for name, n in self.counts.items() if name in SYNC_OPS})


#: Tensor methods that hand a tensor's value to Python (or to the host's memory).
HOST_READS = frozenset(
    {"item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__"}
)


class HostReads(_Counts, TorchFunctionMode):
    """Count the calls of `HOST_READS` methods made while active, by name."""

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        name = getattr(func, "__name__", "")
        if name in HOST_READS:
            self.counts[name] += 1
        return func(*args, **(kwargs or {}))
