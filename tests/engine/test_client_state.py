"""The per-client state store: where it lives (runtime.client_state_device)."""

from pathlib import Path

import pytest
import torch

from fedbench.config import load_run_config
from fedbench.engine.client_state import (
    client_state_device,
    index_state,
    map_tensors,
    stack_states,
    to_device,
)
from fedbench.engine.loop import Engine
from fedbench.engine.plan import execution_plan
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.setup import prepare_run

CPU, CUDA = torch.device("cpu"), torch.device("cuda", 0)


def test_to_device_moves_nested_states() -> None:
    state = {"c": [torch.ones(2), torch.zeros(3)], "n": 3}
    moved = to_device(state, torch.device("meta"))
    assert moved["n"] == 3 and all(t.device.type == "meta" for t in moved["c"])
    assert all(t.device.type == "cpu" for t in state["c"])  # the original is not moved


def test_map_tensors_keeps_the_structure_and_the_non_tensor_leaves() -> None:
    # One recursion serves to_device and index_state: dicts, lists and tuples keep their type.
    state = {"m": (torch.tensor([1.0, 2.0]), [torch.tensor(3.0)]), "t": 0.5}
    doubled = map_tensors(state, lambda t: 2 * t)
    assert isinstance(doubled["m"], tuple) and isinstance(doubled["m"][1], list)
    assert doubled["m"][0].tolist() == [2.0, 4.0] and doubled["m"][1][0].item() == 6.0
    assert doubled["t"] == 0.5
    stacked = stack_states([state, doubled])
    assert index_state(stacked, 1)["m"][0].tolist() == [2.0, 4.0]


def test_stack_states_with_cat_joins_stacked_states_as_the_stacked_step_does() -> None:
    # join=torch.cat concatenates states already stacked over clients (the stacked step's
    # merged groups).
    a = {"m": [torch.arange(4.0).view(2, 2)], "flag": True}
    b = {"m": [torch.arange(4.0, 10.0).view(3, 2)], "flag": True}
    joined = stack_states([a, b], torch.cat)
    assert joined["m"][0].tolist() == torch.arange(10.0).view(5, 2).tolist()
    assert joined["flag"] is True


@pytest.mark.parametrize(
    ("store", "compute", "expected"),
    [
        ("auto", CPU, CPU),
        ("auto", CUDA, CPU),  # N model-sized states beside the model rarely fit on the GPU
        ("cpu", CPU, CPU),
        ("cpu", CUDA, CPU),
        ("device", CPU, CPU),
        ("device", CUDA, CUDA),
    ],
)
def test_store_placement(store: str, compute: torch.device, expected: torch.device) -> None:
    # torch.device("cuda") is only a name: this runs without a GPU.
    assert client_state_device(store, compute) == expected


def _scaffold_engine(tmp_path: Path, store: str, device: str) -> Engine:
    cfg = load_run_config(
        None,
        [
            "algorithm.name=scaffold",
            "model.name=logreg",
            "partition.clients=4",
            "fl.participation=0.5",
            "fl.rounds=3",
            "fl.local_steps=2",
            "eval.every=3",
            f"runtime.device={device}",
            f"runtime.client_state_device={store}",
        ],
    )
    setup = prepare_run(cfg)
    folder = RunFolder.for_config(tmp_path, cfg)
    folder.create(cfg)
    engine = Engine(execution_plan(setup), setup, folder, None)
    engine.run()
    assert set(engine.client_states) == {c for clients in setup.schedule for c in clients}
    return engine


def test_scaffold_keeps_one_state_per_participating_client(tmp_path: Path) -> None:
    engine = _scaffold_engine(tmp_path, "auto", "cpu")
    for state in engine.client_states.values():
        assert all(t.device == CPU for t in state["c"])
        assert any(bool(t.abs().sum() > 0) for t in state["c"])  # c_i was updated


@pytest.mark.cuda
@pytest.mark.parametrize(("store", "expected"), [("auto", "cpu"), ("device", "cuda")])
def test_scaffold_store_on_a_gpu_run(tmp_path: Path, store: str, expected: str) -> None:
    engine = _scaffold_engine(tmp_path, store, "cuda")
    assert engine.state_device.type == expected
    for state in engine.client_states.values():
        assert all(t.device.type == expected for t in state["c"])
