"""The execution plan: one function decides how a run executes, each choice with its reason;
a fallback is an entry of the plan; `train --print-plan` prints it; summary.json records it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedbench.config import load_run_config
from fedbench.engine.plan import (
    CLIPPING_ORDER,
    clipping_candidates,
    clipping_method,
    execution_plan,
)
from fedbench.engine.setup import prepare_run

pytestmark = pytest.mark.engine

DIGITS = ["data.name=digits", "runtime.device=cpu", "partition.clients=4", "fl.rounds=1"]


def _plan(*items: str):
    return execution_plan(prepare_run(load_run_config(None, [*DIGITS, *items])))


def test_a_default_run_is_sequential_eager_fp32() -> None:
    plan = _plan()
    assert plan.executor == "sequential"
    assert [c.what for c in plan.choices] == [
        "executor", "precision", "compile", "cuda_graphs", "channels_last", "seeds_together",
        "threads", "omp_wait_policy", "client_processes",
    ]  # fmt: skip
    assert plan["compile"].value == "off" and plan["cuda_graphs"].value == "off"
    assert plan.fallbacks == []


def test_a_vectorised_request_that_cannot_run_is_a_fallback_with_its_reason() -> None:
    plan = _plan("runtime.engine=vectorized", "algorithm.name=dp_fedavg")
    executor = plan["executor"]
    assert executor.value == "sequential" and executor.fallback
    assert "DP training" in executor.reason
    assert plan["clipping"].value in {"bk", "ghost", "vmap"}
    assert plan.fallbacks == [executor]


def test_compile_says_what_it_compiles_and_why() -> None:
    assert _plan("runtime.compile=true", "algorithm.name=fedadamw")["compile"].value == "step"
    sam = _plan("runtime.compile=true", "runtime.engine=sequential", "algorithm.name=fedsam")
    assert sam["compile"].value == "forward" and sam["compile"].fallback
    assert "several gradients" in sam["compile"].reason
    # auto stacks FedSAM's clients (a compiled small model on the CPU): the vmapped gradient
    # compiles, and the two-gradient step around it runs eagerly.
    stacked = _plan("runtime.compile=true", "algorithm.name=fedsam")
    assert stacked.executor == "vectorized" and stacked["compile"].value == "gradient"
    vec = _plan("runtime.compile=true", "runtime.engine=vectorized", "algorithm.name=mimelite")
    assert vec["compile"].value == "gradient"


@pytest.mark.parametrize("name", ["fedsam", "fafed", "moon"])
def test_rules_with_several_gradients_per_step_are_stacked(name: str) -> None:
    """The stacked executor hands them a gradient oracle over the rows (MOON's differentiates
    the representation term too): no fallback."""
    plan = _plan("runtime.engine=vectorized", f"algorithm.name={name}")
    assert plan.executor == "vectorized" and plan.fallbacks == []
    seeds = _plan("runtime.engine=vectorized", "runtime.seeds_together=2", f"algorithm.name={name}")
    assert seeds["seeds_together"].value == "2"


def test_mimes_full_gradient_pass_is_stacked() -> None:
    items = ["algorithm.name=mimelite", "algorithm.full_batch_gradient=true"]
    plan = _plan("runtime.engine=vectorized", *items)
    assert plan.executor == "vectorized" and plan.fallbacks == []


def test_clients_of_different_step_counts_are_a_fallback_with_its_reason() -> None:
    executor = _plan("runtime.engine=vectorized", "fl.local_steps_min=1")["executor"]
    assert executor.value == "sequential" and executor.fallback
    assert "fl.local_steps_min gives clients different numbers of local steps" in executor.reason


def test_seeds_together_need_the_vectorised_executor() -> None:
    vec = _plan("runtime.seeds_together=3", "runtime.engine=vectorized")["seeds_together"]
    assert vec.value == "3" and not vec.fallback
    # A run the vectorised engine cannot take falls back, and its seeds train one by one.
    dp = _plan("runtime.seeds_together=3", "runtime.engine=vectorized", "algorithm.name=dp_fedavg")
    assert dp["seeds_together"].value == "1" and dp["seeds_together"].fallback
    # The sequential executor, asked for or chosen by auto, is the plan's fallback with its
    # reason (the config no longer decides: it loads such a config).
    seq = _plan("runtime.seeds_together=3", "runtime.engine=sequential")["seeds_together"]
    assert seq.value == "1" and seq.fallback and "only on the vectorized executor" in seq.reason
    auto = _plan("runtime.seeds_together=2")
    assert auto.executor == "sequential" and auto["seeds_together"].fallback


def test_print_plan_prints_every_choice_and_trains_nothing(run_cli, tmp_path: Path) -> None:
    code, out, _ = run_cli(
        "train", *(f"--set={i}" for i in DIGITS), "--set=runtime.engine=vectorized",
        "--set=algorithm.name=dp_fedavg", "--print-plan", "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0
    assert "executor: sequential [fallback] (vectorized asked, but DP training" in out
    assert "clipping: " in out
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_summary_records_the_plan(tmp_path: Path) -> None:
    from fedbench.engine.run import train

    cfg = load_run_config(None, [*DIGITS, "fl.local_steps=1", "runtime.engine=vectorized"])
    result = train(cfg, tmp_path)
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["plan"]["executor"] == {
        "value": "vectorized",
        "reason": "runtime.engine vectorized",
        "fallback": False,
    }
    assert summary["engine"] == "vectorized"


def test_the_clipping_rule_is_the_plans_for_direct_callers_and_the_estimate() -> None:
    """A direct caller of the mechanism and the estimate's ratio lookup (which has no model)
    use the plan's rule: the same method, the same order; the mechanism chooses none."""
    from torch import nn

    from fedbench.privacy.mechanism import PrivateGradient

    conv1d = nn.Sequential(nn.Conv1d(2, 3, 3), nn.Flatten(), nn.Linear(6, 2))  # Opacus only
    params = list(conv1d.parameters())
    method = clipping_method(conv1d)
    direct = PrivateGradient(
        conv1d, params, noise_multiplier=1.0, clip=1.0, batch_size=4, method=method
    )
    assert direct.method == method == "ghost"
    with pytest.raises(TypeError, match="method"):
        PrivateGradient(conv1d, params, noise_multiplier=1.0, clip=1.0, batch_size=4)  # type: ignore[call-arg]
    assert CLIPPING_ORDER == ("bk", "ghost", "vmap")
    assert clipping_candidates("vmap", "bk") == ["vmap"]
    assert clipping_candidates("auto", "ghost") == ["ghost", "bk", "ghost", "vmap"]
    assert clipping_candidates("auto", None) == ["bk", "ghost", "vmap"]
