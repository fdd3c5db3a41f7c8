"""Golden runs: short float64 federations whose metrics.jsonl rows (elapsed time aside) and final
weights must stay bitwise equal across refactors of the engine (issue: one client step, written
once). Every algorithm family, both engines, seeds trained together, the compiled whole step,
sample- and client-level privacy with each clipping method, and BatchNorm / GroupNorm / LoRA
models. The hashes were recorded before the client step was rewritten; a change that moves any
of them changes results, and is a bug unless it is a deliberate, documented rule change (then
re-record with `python -m tests.engine.test_golden_runs --write` and say why in the commit).

The runs execute in a subprocess whose float64 kernels are pinned (`PINNED_ENV`), so that the
hashes hold on any x86-64 machine with the recorded torch, whatever its CPU vendor: left to
itself, MKL picks a code path by CPU vendor and ATen by instruction set, and an Intel Xeon and an
AMD EPYC then agree on the metrics but not on the last bits of the weights.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

from fedbench.config import RunConfig, load_run_config
from fedbench.engine.run import RunResult
from fedbench.engine.run_seeds import train_together
from fedbench.engine.setup import RunSetup
from tests.conftest import read_metrics
from tests.engine.nets import batchnorm_net, prepare64, with_model

pytestmark = [pytest.mark.engine, pytest.mark.slow]

GOLDEN = Path(__file__).parent / "golden" / "runs.json"

BASE = [
    "algorithm.lr=0.02",
    "model.name=cnn",
    "partition.clients=6",
    "partition.kind=dirichlet",
    "partition.alpha=0.5",
    "fl.participation=0.5",
    "fl.rounds=2",
    "fl.local_steps=3",
    "fl.batch_size=8",
    "eval.every=1",
    "eval.train_subset=64",
    "runtime.checkpoint_every=0",
    "runtime.device=cpu",
]


def _groupnorm_net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.GroupNorm(2, 4),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(4 * 8 * 8, 10),
    )


def _prepare(model: Callable[[int], nn.Module] | None) -> Callable[[RunConfig], RunSetup]:
    def prepare(cfg: RunConfig) -> RunSetup:
        setup = prepare64(cfg)
        if model is not None:
            setup = with_model(setup, model(cfg.seed).double())
        return setup

    return prepare


#: name -> (config items, model swapped in or None for the config's own, seeds trained together)
CASES: dict[str, tuple[list[str], Callable[[int], nn.Module] | None, int]] = {
    "fedavg-seq": (["algorithm.name=fedavg"], None, 1),
    "fedavg-vec": (["algorithm.name=fedavg", "runtime.engine=vectorized"], None, 1),
    "scaffold-bn-seq": (["algorithm.name=scaffold"], batchnorm_net, 1),
    "scaffold-bn-vec": (["algorithm.name=scaffold", "runtime.engine=vectorized"], batchnorm_net, 1),
    "fedcm-seq": (["algorithm.name=fedcm"], None, 1),
    "fedadam-seq": (["algorithm.name=fedadam"], None, 1),
    "fedlada-local-cosine": (
        ["algorithm.name=fedlada", "algorithm.lr_schedule=cosine",
         "algorithm.lr_schedule_scope=local"],
        None,
        1,
    ),
    "local-adamw-seq": (["algorithm.name=local_adamw"], None, 1),
    "fedadamw-clip-seq": (["algorithm.name=fedadamw", "algorithm.grad_clip=1.0"], None, 1),
    "fedadamw-clip-vec": (
        ["algorithm.name=fedadamw", "algorithm.grad_clip=1.0", "runtime.engine=vectorized"],
        None,
        1,
    ),
    "fedadamw-gn-vec": (
        ["algorithm.name=fedadamw", "runtime.engine=vectorized"], _groupnorm_net, 1
    ),
    "fedsam-seq": (["algorithm.name=fedsam"], None, 1),
    "fafed-seq": (["algorithm.name=fafed"], None, 1),
    # Two gradients per step through the stacked executor's gradient oracle (per-row norms).
    "fedsam-vec": (["algorithm.name=fedsam", "runtime.engine=vectorized"], None, 1),
    "fafed-seeds-together": (
        ["algorithm.name=fafed", "runtime.engine=vectorized", "runtime.seeds_together=2"],
        None,
        2,
    ),
    "moon-seq": (["algorithm.name=moon"], None, 1),
    "mimelite-seq": (["algorithm.name=mimelite"], None, 1),
    # The representation term and the full local-data gradient on the stacked executor.
    "moon-vec": (["algorithm.name=moon", "runtime.engine=vectorized"], None, 1),
    "mimelite-full-vec": (
        ["algorithm.name=mimelite", "algorithm.full_batch_gradient=true",
         "runtime.engine=vectorized"],
        batchnorm_net,
        1,
    ),
    "fedprox-hetero-seq": (
        ["algorithm.name=fedprox", "fl.local_steps_min=1", "fl.dropout=0.2"], None, 1
    ),
    "fedadamw-seeds-together": (
        ["algorithm.name=fedadamw", "runtime.engine=vectorized", "runtime.seeds_together=2"],
        batchnorm_net,
        2,
    ),
    "dp-fedavg-vmap": (
        ["algorithm.name=dp_fedavg", "privacy.clipping=vmap", "privacy.clip=0.5"], None, 1
    ),
    "dp-fedavg-bk": (
        ["algorithm.name=dp_fedavg", "privacy.clipping=bk", "privacy.clip=0.5"], None, 1
    ),
    "dp-fedadamw-ghost": (
        ["algorithm.name=dp_fedadamw", "privacy.clipping=ghost", "privacy.clip=0.5"], None, 1
    ),
    "dp-fedavg-client": (
        ["algorithm.name=fedavg", "privacy.level=client", "privacy.clip=0.5",
         "privacy.noise_multiplier=0.05"], None, 1
    ),
    # Uploaded second moments under client-level noise (their noisy mean clamped at 0).
    "fedadamw-client-dp": (
        ["algorithm.name=fedadamw", "privacy.level=client", "privacy.clip=0.5",
         "privacy.noise_multiplier=0.5"], None, 1
    ),
    # The compiled whole step, traced through AOTAutograd (aot_eager: no code generation, so a
    # CPU compiler's choices cannot move the hash).
    "fedadamw-captured": (
        ["algorithm.name=fedadamw", "algorithm.grad_clip=1.0", "runtime.compile=true"], None, 1
    ),
    "fedadamw-lora-vit": (
        ["algorithm.name=fedadamw", "model.name=vit_micro", "model.lora.r=2",
         "model.lora.alpha=4", "model.lora.dropout=0.0", "fl.local_steps=2"],
        None,
        1,
    ),
}  # fmt: skip


@contextlib.contextmanager
def _aot_eager() -> Iterator[None]:
    compile_fn = torch.compile
    torch.compile = lambda fn=None, **kw: compile_fn(fn, **{**kw, "backend": "aot_eager"})
    try:
        yield
    finally:
        torch.compile = compile_fn


def _state_hash(path: Path) -> str:
    state = torch.load(path / "model.pt", weights_only=True)
    digest = hashlib.sha256()
    for key in sorted(state):
        t = state[key].detach().cpu().contiguous().reshape(-1)
        digest.update(f"{key}:{t.dtype}:{tuple(t.shape)}".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()[:20]


def _metrics_hash(path: Path) -> str:
    rows = [{k: v for k, v in row.items() if k != "elapsed_s"} for row in read_metrics(path)]
    # repr of a float is exact: two hashes agree only when every value is bitwise equal.
    return hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:20]


def golden_run(name: str, out: Path) -> list[dict[str, str]]:
    """Train case `name` under `out`; each seed's run id and its metrics and weights hashes."""
    items, model, seeds = CASES[name]
    cfgs = [load_run_config(None, [*BASE, *items, f"seed={seed}"]) for seed in range(seeds)]
    # One thread: how a reduction is split over threads moves the last bits, and a thread
    # count that the load of the machine can change would make the hashes flaky.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with _aot_eager():
            results = train_together(cfgs, out, save_model=True, prepare=_prepare(model))
    finally:
        torch.set_num_threads(threads)
    found = []
    for result in results:
        assert isinstance(result, RunResult), result
        assert result.status == "completed", result.summary
        found.append(
            {
                "run_id": result.run_dir.name,
                "metrics": _metrics_hash(result.run_dir),
                "model": _state_hash(result.run_dir),
            }
        )
    return found


#: The environment of the subprocess that trains the golden runs. MKL's conditional numerical
#: reproducibility branch COMPATIBLE is the one its documentation promises to give the same bits
#: on Intel and non-Intel processors (its other branches are chosen by CPU vendor: on an AMD EPYC
#: AVX2, AVX512 and SSE4_2 all gave one hash and an Intel Xeon another); STRICT also makes them
#: independent of the arrays' alignment. ATen's `default` capability is its baseline x86-64 build
#: of the vectorised kernels (no AVX2 / AVX-512 dispatch, whose reduction widths differ), and
#: one OpenMP / MKL thread fixes how reductions are split.
PINNED_ENV = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE,STRICT",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def _record() -> dict:
    return json.loads(GOLDEN.read_text())


def pinned_runs(names: list[str], extra_env: dict[str, str] | None = None) -> dict:
    """Train the golden cases `names` in a subprocess with `PINNED_ENV` (plus `extra_env`); returns
    {"capability": ATen's CPU capability there, "runs": {name: [{run_id, metrics, model}...]}}."""
    root = Path(__file__).resolve().parents[2]
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, **PINNED_ENV, **(extra_env or {}), "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-m", "tests.engine.test_golden_runs", "--json", *names],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"golden subprocess failed ({done.returncode}):\n{done.stderr[-4000:]}"
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def golden_hashes(request: pytest.FixtureRequest) -> dict:
    """Every golden case selected in this session, trained in one pinned subprocess (one torch
    start instead of one per case)."""
    names = sorted(
        {
            item.callspec.params["name"]
            for item in request.session.items
            if item.originalname == "test_golden_run_is_bitwise_unchanged"
        }
    )
    return pinned_runs(names)


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_run_is_bitwise_unchanged(name: str, golden_hashes: dict) -> None:
    record = _record()
    if record["torch"] != torch.__version__:
        # Kernels (and so float rounding) change between torch versions: the hashes say
        # nothing there. Re-record them on the old code with the new torch.
        pytest.skip(f"golden runs recorded with torch {record['torch']}, not {torch.__version__}")
    # The pin took: the subprocess ran ATen's baseline kernels, not this CPU's widest ones.
    assert golden_hashes["capability"] == "DEFAULT"
    assert golden_hashes["runs"][name] == record["runs"][name]


def test_every_case_has_a_golden_record() -> None:
    assert sorted(_record()["runs"]) == sorted(CASES)
    assert _record()["pinned_env"] == PINNED_ENV


def _main(argv: list[str]) -> None:
    import tempfile

    if "--json" in argv:
        # Inside the pinned subprocess: train the named cases, print one JSON line.
        runs = {}
        for case in [a for a in argv if a != "--json"]:
            with tempfile.TemporaryDirectory() as tmp:
                runs[case] = golden_run(case, Path(tmp))
        capability = torch.backends.cpu.get_cpu_capability()
        print(json.dumps({"capability": capability, "runs": runs}))
        return
    # --write [CASE ...]: re-record (all cases, or the named ones) in the pinned subprocess.
    only = [a for a in argv if a != "--write"]
    record = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {"runs": {}}
    record["torch"] = torch.__version__
    record["pinned_env"] = PINNED_ENV
    found = pinned_runs(only or sorted(CASES))
    for case, runs in found["runs"].items():
        record["runs"][case] = runs
        print(case, runs, flush=True)
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__" and {"--write", "--json"} & set(sys.argv):
    _main(sys.argv[1:])
