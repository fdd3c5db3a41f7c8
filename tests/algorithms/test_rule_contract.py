"""The rule contract (docs/extending.md, "The algorithm contract"), checked for EVERY registered
algorithm through every executor that can run it:

(a) elementwise: the vectorised executor steps S clients with one call of the local rule on their
    stacked tensors; each client's rows must equal that client stepped alone (float64, 1e-12);
(b) no per-run state on the algorithm object: one object serves every client, every executor and
    (with seeds together) several runs, so its `__dict__` (deep, tensors by value) is the same
    after a round as before, and one object shared by all the executors below gives each the
    result a fresh one gives;
(c) no host sync in a non-diagnostic round: not repeated here. tests/engine/test_host_syncs.py
    (`test_a_round_reads_nothing_back`) runs every non-private rule through the sequential and
    the vectorised engine and counts the ops that sync; a captured step cannot sync at all
    (`fullgraph=True` turns a host read into a compile error, and tests/engine/test_captured.py
    checks that every capturable rule is one graph).

The executors are the engine's own pieces, on tests/algorithms/harness.py's float64
least-squares problem (2 rounds, 2 local steps, 3 clients):
- sequential: `local_step_with_oracle` per client with Python scalars (fedbench.engine.client);
- vectorized, where `vectorized_unsupported` is None: the clients' `client_begin` states stacked
  (`stack_states`), one `local_step_with_oracle` over the stacked rows with their gradient
  oracle (`StepOracle(rows=S)`: FedSAM's and FAFED's two gradients, per-row norms), each
  client's state read back with `index_state` (fedbench.engine.stacked);
- captured, where `captured_unsupported` is None: the local rule compiled as the engine compiles
  it (`compile_per_owner`, fullgraph; the aot_eager backend on the CPU, as
  tests/engine/test_captured.py does), its scalars 0-d tensors (`step_scalars`), one client at a
  time (the compiled sequential step) and stacked (the vectorised engine's compiled whole step).

Skipped by design: fedcada, registered so that tables can name its row, refuses to be built
(no readable public source of its rule).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import Tensor
from torch._dynamo.utils import counters

from fedbench.algorithms import ALGORITHMS, Algorithm, RoundInfo
from fedbench.algorithms.base import ClientUpload, StepOracle
from fedbench.algorithms.fedavg import FedAvg
from fedbench.config import load_run_config
from fedbench.engine.captured import captured_unsupported, compile_per_owner, step_scalars
from fedbench.engine.client_state import index_state, stack_states
from fedbench.engine.plan import vectorized_unsupported
from tests.algorithms.harness import SPEC, Problem, flatten, make

#: Registered but refused by design (its constructor raises: no readable source of its rule).
REFUSED = {"fedcada"}
#: Rules whose step reads a classifier's structure that this toy problem has not (FedRoD: the
#: head's logits under the balanced softmax and each client's class counts); their contract
#: is checked on a real model in tests/personal (both executors, resume).
NEEDS_CLASSIFIER = {"fedrod"}
NAMES = sorted(name for name, _ in ALGORITHMS.items() if name not in REFUSED | NEEDS_CLASSIFIER)
CLIENTS, ROUNDS, STEPS, LR = 3, 2, 2, 0.05
CPU = torch.device("cpu")
#: The noise std a DP rule is told about (DP-FedAdamW debiases its v by it).
NOISE_STD = 0.01


@pytest.fixture(autouse=True)
def _aot_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compile through AOTAutograd and run the graph eagerly (test_captured's CPU backend): the
    capture is checked, without inductor's C++ build."""
    compile_fn = torch.compile
    monkeypatch.setattr(
        torch, "compile", lambda fn, **kw: compile_fn(fn, backend="aot_eager", **kw)
    )


def _executors(name: str, algorithm: Algorithm) -> list[str]:
    """The executors that run `name`, as the engine's planner decides."""
    private = ALGORITHMS.get(name).requires_privacy
    items = [f"algorithm.name={name}", *(["privacy.clip=0.5"] if private else [])]
    setup = SimpleNamespace(cfg=load_run_config(None, items), algorithm=algorithm)
    stacked = vectorized_unsupported(setup) is None  # type: ignore[arg-type]
    captured = captured_unsupported(algorithm, private) is None
    return [
        "sequential",
        *(["vectorized"] if stacked else []),
        *(["captured"] if captured else []),
        *(["captured-vectorized"] if captured and stacked else []),
    ]


#: The rules that the captured step runs (compiled alone, and stacked where they vectorise).
CAPTURED = [name for name in NAMES if "captured" in _executors(name, make(name, clients=CLIENTS))]


def _local_phase(
    algorithm: Algorithm,
    executor: str,
    problem: Problem,
    x: list[Tensor],
    locals_: list[Any],
    info: RoundInfo,
    compiled: Callable[..., None] | None,
) -> tuple[list[list[Tensor]], list[Any]]:
    """The K local steps of every client under `executor`: their end points and local states."""
    n = len(locals_)
    if executor in ("sequential", "captured"):
        ys = [[t.clone() for t in x] for _ in range(n)]
        for i, (y, local) in enumerate(zip(ys, locals_, strict=True)):
            for k in range(1, info.local_steps + 1):
                if executor == "sequential":
                    oracle = StepOracle(lambda y=y, i=i: problem.grad(y, i))
                    algorithm.local_step_with_oracle(y, oracle, local, k, info.at_step(k))
                    continue
                g = problem.grad(y, i)
                k_tensor, tensor_info = step_scalars(k, info.at_step(k), CPU)
                with torch.no_grad():
                    assert compiled is not None
                    compiled(y, g, local, k_tensor, tensor_info)
        return ys, locals_
    # Stacked: one rule call for all the clients' rows (vectorized / captured-vectorized),
    # through the rows' gradient oracle as the stacked executor calls it (stacked.stacked_step).
    y = [t.unsqueeze(0).expand(n, *t.shape).clone() for t in x]
    local = stack_states(locals_)

    def gradient() -> list[Tensor]:
        rows = [problem.grad([t[i] for t in y], i) for i in range(n)]
        return [torch.stack(parts) for parts in zip(*rows, strict=True)]

    for k in range(1, info.local_steps + 1):
        if executor == "vectorized":
            oracle = StepOracle(gradient, rows=n)
            algorithm.local_step_with_oracle(y, oracle, local, k, info.at_step(k))
            continue
        g = gradient()
        with torch.no_grad():
            assert compiled is not None
            compiled(y, g, local, *step_scalars(k, info.at_step(k), CPU))
    return [[t[i] for t in y] for i in range(n)], [index_state(local, i) for i in range(n)]


def _train(algorithm: Algorithm, executor: str) -> dict[str, Any]:
    """ROUNDS rounds of the round protocol (harness.run_federated's), each client's local steps
    under `executor`; the final model, server state and client states."""
    problem = Problem(clients=CLIENTS)
    # Static shapes, as the vectorised engine compiles its whole step (one graph per shape).
    compiled = (
        compile_per_owner(algorithm.local_step, dynamic=False) if "captured" in executor else None
    )
    noise = NOISE_STD if type(algorithm).requires_privacy else 0.0
    x = problem.x0()
    server = algorithm.init_server_state(x)
    states: dict[int, Any] = {}
    for r in range(ROUNDS):
        info = RoundInfo(r, LR, STEPS, CLIENTS, CLIENTS, grad_noise_std=noise)
        stored = [states.get(i) for i in range(CLIENTS)]
        locals_ = [algorithm.client_begin(x, server, s, info) for s in stored]
        ys, locals_ = _local_phase(algorithm, executor, problem, x, locals_, info, compiled)
        sums: dict[str, list[Tensor]] = {}
        uploads: list[ClientUpload] = []
        for i, (y, local) in enumerate(zip(ys, locals_, strict=True)):
            with torch.no_grad():
                upload, new_state = algorithm.client_end(y, x, local, stored[i], info)
            if new_state is not None:
                states[i] = new_state
            if algorithm.uses_client_uploads:
                uploads.append(ClientUpload.kept(i, 1.0, upload))
            for key, tensors in upload.items():
                previous = sums.get(key)
                sums[key] = [
                    t.clone() if previous is None else previous[j] + t
                    for j, t in enumerate(tensors)
                ]
        mean = {key: [t / CLIENTS for t in tensors] for key, tensors in sums.items()}
        with torch.no_grad():
            algorithm.server_update_with_uploads(x, mean, uploads, server, info)
    return {"x": x, "server": server, "clients": states}


def _leaves(tree: Any) -> list[Tensor]:
    """Every tensor of a state, in a fixed order (None and Python numbers as 0-d tensors)."""
    if isinstance(tree, Tensor):
        return [tree.detach().double().reshape(-1)]
    if isinstance(tree, dict):
        return [leaf for key in sorted(tree, key=str) for leaf in _leaves(tree[key])]
    if isinstance(tree, list | tuple):
        return [leaf for item in tree for leaf in _leaves(item)]
    if tree is None:
        return []
    return [torch.tensor([float(tree)], dtype=torch.float64)]


def _same_state(before: Any, after: Any) -> bool:
    """Deep equality of an object's attributes, tensors compared by value (and dtype, shape)."""
    if isinstance(before, Tensor):
        return (
            isinstance(after, Tensor) and before.dtype == after.dtype and torch.equal(before, after)
        )
    if isinstance(before, dict):
        return (
            isinstance(after, dict)
            and before.keys() == after.keys()
            and all(_same_state(before[k], after[k]) for k in before)
        )
    if isinstance(before, list | tuple):
        return (
            type(after) is type(before)
            and len(after) == len(before)
            and all(_same_state(a, b) for a, b in zip(before, after, strict=True))
        )
    return bool(before == after)


def _assert_contract(name: str, build: Callable[[], Algorithm], compiled: bool = False) -> None:
    """The executors of `name` (the eager ones, or the compiled ones) on one shared object of
    `build` against a fresh object's sequential run."""
    shared = build()
    attributes = copy.deepcopy(shared.__dict__)
    reference = _train(build(), "sequential")
    start = Problem(clients=CLIENTS).x0()
    moved = [float((flatten(reference["x"]) - flatten(start)).abs().max())]
    # A personal part never reaches x (Local-only: all of it): its clients' stored copies moved.
    index = getattr(shared, "personal_index", [])
    for state in reference["clients"].values():
        if isinstance(state, dict) and "personal" in state:
            pairs = zip(index, state["personal"], strict=True)
            moved += [float((t - start[j]).abs().max()) for j, t in pairs]
    assert max(moved) > 1e-5  # the rounds did train (FADAS: eta_g 1e-4)
    for executor in _executors(name, shared):
        if ("captured" in executor) != compiled:
            continue
        graphs = counters["stats"]["unique_graphs"]
        result = _train(shared, executor)
        if "captured" in executor:  # compiled, not run eagerly
            assert counters["stats"]["unique_graphs"] > graphs, executor
        # (b) the shared object kept no state of the runs before; none of this one either.
        assert _same_state(attributes, shared.__dict__), f"{name} kept state ({executor})"
        # (a) for the stacked executors; the compiled ones to float rounding (test_captured's).
        tol = 1e-12 if "captured" not in executor else 1e-10
        for part in ("x", "server", "clients"):
            got, want = _leaves(result[part]), _leaves(reference[part])
            assert len(got) == len(want), (executor, part)
            torch.testing.assert_close(
                torch.cat(got) if got else torch.zeros(0, dtype=torch.float64),
                torch.cat(want) if want else torch.zeros(0, dtype=torch.float64),
                atol=tol,
                rtol=tol,
                msg=f"{name}: {executor} differs from sequential in {part}",
            )


@pytest.mark.parametrize("name", NAMES)
def test_every_rule_keeps_the_contract_in_the_eager_executors(name: str) -> None:
    _assert_contract(name, lambda: make(name, clients=CLIENTS))


#: Compiling: left out of `make mutation` (mutmut's trampolines are not traceable in one graph).
@pytest.mark.engine
@pytest.mark.parametrize("name", CAPTURED)
def test_every_capturable_rule_keeps_the_contract_compiled(name: str) -> None:
    _assert_contract(name, lambda: make(name, clients=CLIENTS), compiled=True)


class _Counting(FedAvg):
    """Keeps a step count on the object: per-run state."""

    def local_step(self, y, g, local, k, info) -> None:
        self.steps = self.__dict__.get("steps", 0) + 1
        super().local_step(y, g, local, k, info)


class _Centring(FedAvg):
    """Subtracts part of each tensor's mean: not elementwise over the stacked client rows."""

    def local_step(self, y, g, local, k, info) -> None:
        super().local_step(y, g, local, k, info)
        for t in y:
            t.sub_(0.1 * t.mean())


@pytest.mark.parametrize(
    ("rule", "why"), [(_Counting, "kept state"), (_Centring, "vectorized differs")]
)
def test_the_check_fails_a_rule_that_breaks_the_contract(rule: type[FedAvg], why: str) -> None:
    build = lambda: rule(make("fedavg").params, SPEC, num_clients=CLIENTS)  # noqa: E731
    with pytest.raises(AssertionError, match=why):
        _assert_contract("fedavg", build)


def test_the_executors_are_those_the_planner_allows() -> None:
    """The contract test reaches every executor: stacked and compiled rules are many, a rule
    with several gradients per step is stacked through its oracle (not captured), and a rule
    that the planner keeps sequential (sample-level DP) is run sequentially."""
    kinds = {name: _executors(name, make(name, clients=CLIENTS)) for name in NAMES}
    assert kinds["fedadamw"] == ["sequential", "vectorized", "captured", "captured-vectorized"]
    assert kinds["fedsam"] == ["sequential", "vectorized"] == kinds["fafed"]
    assert kinds["dp_fedadamw"] == ["sequential"]
    assert kinds["mimelite"] == ["sequential", "vectorized"]
    assert sum("captured-vectorized" in k for k in kinds.values()) >= 12
