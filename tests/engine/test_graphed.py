"""The vectorised executor's step graphs (fedbench.engine.graphed) on the CPU: the static-buffer
plumbing replayed by `RecordedReplay` (the step's aten ops recorded once and replayed on the
tensors they read, as a CUDA graph replays its kernels on the memory it captured) trains bitwise
as the eager vectorised engine, in float64; copy-in code that rebinds a static buffer instead of
copying into it fails that; a step's Python side does nothing a graph could not replay. The CUDA
graph itself: tests/engine/test_cuda.py."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from fedbench.algorithms.base import RoundInfo
from fedbench.config import load_run_config
from fedbench.engine import plan, vectorized
from fedbench.engine.captured import captured_unsupported
from fedbench.engine.dispatch import HostReads, OpCounter
from fedbench.engine.graphed import EagerReplay, StaticStep, StepGraphs, StepReplay
from fedbench.engine.plan import execution_plan
from fedbench.engine.recorded import RecordedReplay
from fedbench.engine.run import RunResult
from fedbench.engine.run_seeds import train_together
from fedbench.engine.setup import RunSetup
from fedbench.errors import FedbenchError
from tests.engine.nets import batchnorm_net, prepare64, with_model

pytestmark = pytest.mark.engine

BASE = [
    "algorithm.lr=0.02",
    "model.name=cnn",
    "partition.clients=6",
    "partition.kind=dirichlet",
    "partition.alpha=0.5",
    "fl.participation=0.5",
    "fl.rounds=3",
    "fl.local_steps=3",
    "fl.batch_size=8",
    "eval.every=1",
    "eval.train_subset=64",
    "runtime.checkpoint_every=0",
    "runtime.device=cpu",
    "runtime.engine=vectorized",
    # 3 clients a round in chunks of 2: chunks of unequal sizes (and widths, with BN)
    "runtime.client_chunk=2",
]


def _prepare_bn(cfg):
    return with_model(prepare64(cfg), batchnorm_net(cfg.seed).double())


def _train(
    tmp: Path,
    items: list[str],
    seeds: int,
    bn: bool,
    graphs: list[StepGraphs] | None,
    tensor_scalars: bool = False,
    replay: Callable[[], StepReplay] | None = None,
) -> list[tuple[list[str], dict[str, torch.Tensor]]]:
    """Each seed's metrics rows (elapsed time aside, as exact reprs) and final weights; with
    `graphs`, its steps replayed on static buffers (each engine's StepGraphs appended there);
    with `tensor_scalars`, eager steps taking their scalars as 0-d tensors (`whole_step`)."""
    cfgs = [load_run_config(None, [*BASE, *items, f"seed={s}"]) for s in range(seeds)]
    prepare = _prepare_bn if bn else prepare64
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the reduction split over threads moves the last bits
    try:
        with pytest.MonkeyPatch.context() as patch:
            if graphs is not None:
                # The CPU stands in for CUDA: the same rules graphed, recorded once and
                # replayed (RecordedReplay, unless the test gives another stand-in).

                def unsupported(cfg, device, algorithm):
                    return captured_unsupported(algorithm, private=False)

                def make(strict: bool) -> StepGraphs:
                    graphs.append(StepGraphs(replay or RecordedReplay, strict=strict))
                    return graphs[-1]

                patch.setattr(plan, "stacked_graphs_unsupported", unsupported)
                patch.setattr(vectorized, "cuda_step_graphs", make)
            if tensor_scalars:
                init = vectorized.VectorizedEngine.__init__

                def eager_tensor_scalars(engine, *args) -> None:
                    init(engine, *args)
                    engine.tensor_scalars = True  # uncompiled: whole_step is the eager step

                patch.setattr(vectorized.VectorizedEngine, "__init__", eager_tensor_scalars)
            results = train_together(cfgs, tmp, save_model=True, prepare=prepare)
    finally:
        torch.set_num_threads(threads)
    out = []
    for result in results:
        assert isinstance(result, RunResult) and result.status == "completed", result
        lines = (result.run_dir / "metrics.jsonl").read_text().splitlines()
        rows = [
            json.dumps({k: v for k, v in json.loads(line).items() if k != "elapsed_s"})
            for line in lines
        ]
        out.append((rows, torch.load(result.run_dir / "model.pt", weights_only=True)))
    return out


CASES = {
    # FedAdamW (m, v: state) on BatchNorm, a cosine schedule within the round, unequal chunks
    "fedadamw-bn-local-cosine": (
        ["algorithm.name=fedadamw", "algorithm.lr_schedule=cosine",
         "algorithm.lr_schedule_scope=local"], 1, True),
    # SCAFFOLD's control variates, two seeds stacked in one chunk trainer (BatchNorm)
    "scaffold-bn-seeds-together": (
        ["algorithm.name=scaffold", "runtime.seeds_together=2"], 2, True),
    # clients of unequal sizes padded to one width: the sample mask is a static buffer too
    "fedavg-padded": (["algorithm.name=fedavg", "fl.batch_size=0"], 1, False),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_replayed_steps_are_bitwise_the_eager_steps(name: str, tmp_path: Path) -> None:
    """Bitwise equal to the eager stacked step taking the same 0-d tensor scalars; equal to the
    eager engine with Python scalars to float rounding (the rule's scalar arithmetic rounds
    differently on a tensor: FedAdamW's eps 1e-8 amplifies that to ~1e-9 over 9 steps)."""
    items, seeds, bn = CASES[name]
    eager = _train(tmp_path / "eager", items, seeds, bn, None)
    reference = _train(tmp_path / "tensor-scalars", items, seeds, bn, None, tensor_scalars=True)
    graphs: list[StepGraphs] = []
    replayed = _train(tmp_path / "graphs", items, seeds, bn, graphs)
    assert sum(g.captured for g in graphs) >= 2  # several keys: chunks of 2 and 1 client(s)
    # every local step of every chunk of every round is a replay (3 rounds, K 3, >= 2 chunks)
    assert sum(g.replays for g in graphs) >= 3 * 3 * 2
    for (rows_a, state_a), (rows_b, state_b), (_, state_c) in zip(
        reference, replayed, eager, strict=True
    ):
        assert rows_a == rows_b
        assert state_a.keys() == state_b.keys()
        for key in state_a:
            assert torch.equal(state_a[key], state_b[key]), key
            torch.testing.assert_close(state_b[key], state_c[key], rtol=1e-7, atol=1e-7)


def _setup(items: list[str]) -> RunSetup:
    return prepare64(load_run_config(None, [*BASE, *items]))


def _copy_in_problems(feed: Callable[..., None]) -> list[str]:
    """What is wrong with `feed` (StaticStep.feed or a planted bug) and `load` as a graph's
    copy-in: each must be exactly its copies and fills (feed: the batch's two copies and one
    fill per scalar; load: the chunk's start values copied), read nothing back, and write into
    the static tensors the capture read, not rebind them (an op set that was merely a subset of
    the allowed one let a rebinding pass)."""
    graphs = StepGraphs(EagerReplay)
    y = [torch.randn(2, 3, dtype=torch.float64), torch.randn(2, 4, dtype=torch.float64)]
    local = {"m": [torch.zeros(2, 3), torch.zeros(2, 4)], "t": 0}
    xb, yb = torch.randn(2, 5, 1, 8, 8), torch.randint(0, 10, (2, 5))
    info = RoundInfo(round=1, lr=0.1, local_steps=3, num_clients=7, sampled=2, lr_total=0.25)
    static = graphs.begin(object(), y, {}, local, xb, yb, None, info)  # type: ignore[arg-type]
    inputs = [static.xb, static.yb, *static.scalars.values(), *static.leaves()]
    xb_next = xb + 1
    with HostReads() as reads, OpCounter() as fed:
        feed(static, xb_next, yb, 2, info)
    with HostReads() as reads_load, OpCounter() as loaded:
        static.load(y, {}, local, None)
    problems = []
    if reads.counts or reads_load.counts or fed.syncs or loaded.syncs:
        problems.append("reads back")
    if fed.counts != Counter({"copy_": 2, "fill_": 4}):
        problems.append(f"feed ops {dict(fed.counts)}")
    if loaded.counts != Counter({"_foreach_copy_": 1, "copy_": 2}):
        problems.append(f"load ops {dict(loaded.counts)}")
    after = [static.xb, static.yb, *static.scalars.values(), *static.leaves()]
    if not all(a is b for a, b in zip(after, inputs, strict=True)):
        problems.append("rebinds a static tensor")
    if [float(s) for s in static.scalars.values()] != [2.0, 0.1, 1.0, 0.25]:
        problems.append("scalars")
    if not torch.equal(static.xb, xb_next):
        problems.append("batch")
    return problems


def test_the_per_step_copy_in_allocates_nothing_and_reads_nothing_back() -> None:
    """`feed` (each step's batch and scalars into the static buffers) is copies and fills only,
    and `load` (a chunk's start values) copies only: into the tensors the capture read."""
    assert _copy_in_problems(StaticStep.feed) == []


@pytest.mark.parametrize("what", ["batch", "k"])
def test_the_copy_in_check_sees_a_rebinding(what: str) -> None:
    problems = _copy_in_problems(_rebinding_feed(what))
    assert "rebinds a static tensor" in problems and any("feed ops" in p for p in problems)


def _rebinding_feed(what: str) -> Callable[..., None]:
    """StaticStep.feed with a planted bug: the batch (`what` "batch") or the step scalar k ("k")
    rebound to a new tensor instead of copied into the static one."""

    def feed(self: StaticStep, xb, yb, k: int, info: RoundInfo) -> None:
        if what == "batch":
            self.xb, self.yb = xb.clone(), yb.clone()
        else:
            self.xb.copy_(xb)
            self.yb.copy_(yb)
        values = {"k": k, "lr": info.lr, "round": info.round, "lr_total": info.lr_total}
        for name, scalar in list(self.scalars.items()):
            if what == "k" and name == "k":
                self.scalars[name] = torch.tensor(float(k), dtype=torch.float64)
            elif isinstance(values[name], torch.Tensor):
                scalar.copy_(values[name])
            else:
                scalar.fill_(values[name])

    return feed


@pytest.mark.parametrize("what", ["batch", "k"])
def test_a_copy_in_that_rebinds_instead_of_copying_fails_the_replay(
    what: str, tmp_path: Path, monkeypatch
) -> None:
    """A CUDA graph replays on the tensors it captured: a copy-in that rebinds the batch or the
    step scalar k trains every later step on the first step's values. The recording stand-in
    does the same, so the bitwise comparison fails; `EagerReplay`, which runs the step's Python
    again (reading the rebound tensors), did not notice."""
    items = ["algorithm.name=fedadamw"]  # k enters its bias corrections
    reference = _train(tmp_path / "reference", items, 1, False, None, tensor_scalars=True)
    monkeypatch.setattr(StaticStep, "feed", _rebinding_feed(what))
    recorded = _train(tmp_path / "recorded", items, 1, False, [])
    eager = _train(tmp_path / "eager", items, 1, False, [], replay=EagerReplay)
    (rows_ref, state_ref), (rows_rec, state_rec), (rows_eager, state_eager) = (
        reference[0],
        recorded[0],
        eager[0],
    )
    assert rows_rec != rows_ref
    assert not all(torch.equal(state_ref[key], state_rec[key]) for key in state_ref)
    assert rows_eager == rows_ref  # the old stand-in's blind spot
    assert all(torch.equal(state_ref[key], state_eager[key]) for key in state_ref)


def test_the_recorded_replay_runs_no_python_of_the_step() -> None:
    """Recorded once: a replay runs the recorded ops on the captured tensors, not the step (whose
    Python side effects do not happen again), reading what was copied into them since."""
    x, out = torch.tensor([1.0, 2.0]), torch.zeros(2)
    calls: list[int] = []

    def step() -> None:
        calls.append(1)
        out.copy_(x * 2 + out)

    replay = RecordedReplay()
    replay.capture(step)
    assert calls == [1] and out.tolist() == [2.0, 4.0] and replay.ops == 3
    x.copy_(torch.tensor([10.0, 20.0]))
    replay.replay()
    assert calls == [1] and out.tolist() == [22.0, 44.0]
    x = torch.tensor([0.0, 0.0])  # rebound: the replay still reads the captured tensor
    replay.replay()
    assert out.tolist() == [42.0, 84.0]


def test_a_rule_that_rebinds_its_state_cannot_be_graphed() -> None:
    graphs = StepGraphs(EagerReplay)
    y = [torch.zeros(2, 3)]
    local = {"m": torch.zeros(2, 3)}
    xb, yb = torch.zeros(2, 1), torch.zeros(2, 1)
    info = RoundInfo(round=0, lr=0.1, local_steps=1, num_clients=2, sampled=2)
    static = graphs.begin(object(), y, {}, local, xb, yb, None, info)  # type: ignore[arg-type]

    def rebinds(y, buffers, local, xb, yb, mask, k, info) -> None:
        local["m"] = local["m"] + 1

    with pytest.raises(RuntimeError, match="rebinds"):
        graphs.step(static, rebinds, object(), (y, {}, local), xb, yb, 1, info)  # type: ignore[arg-type]


def _on_cuda(setup: RunSetup) -> RunSetup:
    setup.device = torch.device("cuda")  # the plan only reads it
    return setup


def test_the_plan_graphs_the_vectorized_step_of_a_capturable_rule_on_cuda() -> None:
    plan = execution_plan(_on_cuda(_setup(["algorithm.name=fedadamw"])))
    assert plan["cuda_graphs"].value == "on" and "stacked step" in plan["cuda_graphs"].reason
    off = execution_plan(_on_cuda(_setup(["algorithm.name=fedsam"])))["cuda_graphs"]
    assert off.value == "off" and "several gradients" in off.reason
    cpu = execution_plan(_setup(["algorithm.name=fedadamw"]))["cuda_graphs"]
    assert (cpu.value, cpu.reason) == ("off", "no CUDA device")


def test_graphs_on_for_a_rule_that_cannot_be_graphed_is_a_user_error() -> None:
    setup = _on_cuda(_setup(["algorithm.name=fedsam"]))
    setup.cfg = setup.cfg.model_copy(
        update={"runtime": setup.cfg.runtime.model_copy(update={"cuda_graphs": "on"})}
    )
    with pytest.raises(FedbenchError, match=r"cuda_graphs on cannot graph .*several gradients"):
        execution_plan(setup)


def test_a_graphed_round_reads_nothing_back(tmp_path: Path) -> None:
    """After the first round (the captures), a round of replayed steps with FedAdamW on
    BatchNorm syncs nothing: copies in, replays, copies out (test_host_syncs's check)."""
    from fedbench.engine.run import select_engine
    from fedbench.engine.run_folder import RunFolder
    from fedbench.engine.schedule import local_lr

    cfg = load_run_config(None, [*BASE, "algorithm.name=fedadamw"])
    setup = _prepare_bn(cfg)
    engine = select_engine(setup, RunFolder(tmp_path), None)
    assert isinstance(engine, vectorized.VectorizedEngine) and engine.step_graphs is None  # CPU
    engine.step_graphs = graphs = StepGraphs(EagerReplay)
    engine._round(0, local_lr(cfg.algorithm, 0, cfg.fl.rounds))
    captured = graphs.captured
    with HostReads() as reads, OpCounter() as ops:
        engine._round(1, local_lr(cfg.algorithm, 1, cfg.fl.rounds))
    assert ops.total > 100 and dict(ops.syncs) == {} and dict(reads.counts) == {}
    # two rounds of two chunks (2 + 1 clients), K steps each; no capture in the second round
    assert graphs.replays == 2 * 2 * cfg.fl.local_steps and graphs.captured == captured


def test_the_auto_chunk_is_fixed_once_graphed(tmp_path: Path, monkeypatch) -> None:
    """Each chunk size is a capture of its own: with graphs, `client_chunk: auto` keeps its first
    size (free memory, which the captures themselves take, would move it)."""
    from fedbench.engine.run import select_engine
    from fedbench.engine.run_folder import RunFolder

    cfg = load_run_config(None, [*BASE[:-1], "algorithm.name=fedavg"])  # client_chunk auto
    engine = select_engine(prepare64(cfg), RunFolder(tmp_path), None)
    assert isinstance(engine, vectorized.VectorizedEngine)
    engine._per_client_bytes = 100
    free = iter([1000, 400, 400, 400, 4000])
    monkeypatch.setattr(vectorized, "free_memory_bytes", lambda device: next(free))
    assert engine.client_chunk(10) == 5 and engine.client_chunk(10) == 2  # eager: moves
    engine.step_graphs = StepGraphs(EagerReplay)
    engine._graphed_chunk = None
    assert [engine.client_chunk(10), engine.client_chunk(10), engine.client_chunk(3)] == [2, 2, 2]
    assert engine.client_chunk(1) == 1


class _FailingCapture(EagerReplay):
    """A capture that fails after its warm-up ran (as CUDA's does on an op it cannot capture)."""

    def capture(self, step: Callable[[], None]) -> None:
        step()
        raise RuntimeError("operation not permitted when stream is capturing\nmore")


def test_a_failed_capture_runs_the_steps_eagerly_under_auto(tmp_path: Path) -> None:
    """`cuda_graphs: auto`: the warm-up undone, every step runs eagerly on the static buffers
    (bitwise the eager tensor-scalar steps), the reason recorded; `on`: the error stands."""
    items = ["algorithm.name=fedadamw"]
    reference = _train(tmp_path / "reference", items, 1, True, None, tensor_scalars=True)
    graphs: list[StepGraphs] = []
    got = _train(tmp_path / "failed", items, 1, True, graphs, replay=_FailingCapture)
    assert graphs[0].captured == 0 and graphs[0].replays > 0
    assert graphs[0].fallback == (
        "capturing the stacked step failed (operation not permitted when stream is capturing)"
    )
    summary = json.loads(next((tmp_path / "failed").rglob("summary.json")).read_text())
    assert summary["compile_fallback"] == graphs[0].fallback
    (rows_a, state_a), (rows_b, state_b) = reference[0], got[0]
    assert rows_a == rows_b and all(torch.equal(state_a[k], state_b[k]) for k in state_a)
    strict = StepGraphs(_FailingCapture, strict=True)  # runtime.cuda_graphs on
    y, local, xb = [torch.zeros(2, 3)], {"m": torch.zeros(2, 3)}, torch.zeros(2, 1)
    info = RoundInfo(round=0, lr=0.1, local_steps=1, num_clients=2, sampled=2)
    static = strict.begin(object(), y, {}, local, xb, xb, None, info)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="stream is capturing"):
        strict.step(static, lambda *a: None, object(), (y, {}, local), xb, xb, 1, info)  # type: ignore[arg-type]
