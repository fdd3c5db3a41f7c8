"""The per-client state store: where it lives (runtime.client_state_device)."""

from pathlib import Path

import pytest
import torch

from fedbench.config import load_run_config
from fedbench.engine.client_state import to_device
from fedbench.engine.loop import Engine
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.setup import prepare_run


def test_to_device_moves_nested_states() -> None:
    state = {"c": [torch.ones(2), torch.zeros(3)], "n": 3}
    moved = to_device(state, torch.device("cpu"))
    assert moved["n"] == 3 and all(t.device.type == "cpu" for t in moved["c"])


@pytest.mark.parametrize("store", ["auto", "cpu", "device"])
def test_scaffold_keeps_one_state_per_client(tmp_path: Path, store: str) -> None:
    cfg = load_run_config(
        None,
        [
            "algorithm.name=scaffold",
            "model.name=logreg",
            "partition.clients=4",
            "fl.participation=0.5",
            "fl.rounds=3",
            "fl.local_steps=2",
            f"runtime.client_state_device={store}",
        ],
    )
    setup = prepare_run(cfg)
    folder = RunFolder.for_config(tmp_path, cfg)
    folder.create(cfg)
    engine = Engine(setup, folder, None)
    engine.run()
    # auto and cpu keep the store on the CPU; device keeps it beside the model.
    expected = setup.device.type if store == "device" else "cpu"
    assert engine.state_device.type == expected
    assert set(engine.client_states) == {c for clients in setup.schedule for c in clients}
    for state in engine.client_states.values():
        assert all(t.device.type == expected for t in state["c"])
