"""`fl.label_smoothing`: the newcomer's proof that the objective is one edit - a config field
read by the one objective, so every executor trains with it (sequential, vectorised, compiled)
and evaluation keeps reporting the plain cross-entropy."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from fedbench.config import load_run_config
from fedbench.engine.run_seeds import train_together
from tests.conftest import read_metrics
from tests.engine.nets import prepare64

pytestmark = [pytest.mark.engine, pytest.mark.slow]

BASE = [
    "data.name=digits",
    "model.name=cnn",
    "partition.clients=4",
    "fl.participation=0.5",
    "fl.rounds=1",
    "fl.local_steps=2",
    "fl.batch_size=8",
    "runtime.device=cpu",
    "runtime.checkpoint_every=0",
]


def test_no_smoothing_keeps_every_run_id() -> None:
    plain = load_run_config(None, BASE)
    zero = load_run_config(None, [*BASE, "fl.label_smoothing=0.0"])
    smoothed = load_run_config(None, [*BASE, "fl.label_smoothing=0.1"])
    assert plain.run_id() == zero.run_id() != smoothed.run_id()
    assert "label_smoothing" not in plain.acting_data()["fl"]


def test_out_of_range_smoothing_is_a_config_error() -> None:
    from fedbench.errors import FedbenchError

    with pytest.raises((FedbenchError, ValueError)):
        load_run_config(None, [*BASE, "fl.label_smoothing=1.0"])


def _weights(out: Path, engine: str, smoothing: float) -> dict[str, torch.Tensor]:
    cfg = load_run_config(
        None, [*BASE, f"runtime.engine={engine}", f"fl.label_smoothing={smoothing}"]
    )
    (result,) = train_together(
        [cfg],
        out,
        save_model=True,
        prepare=prepare64,
    )
    return torch.load(result.run_dir / "model.pt", weights_only=True), read_metrics(result.run_dir)


@pytest.mark.parametrize("engine", ["sequential", "vectorized"])
def test_every_executor_trains_the_smoothed_objective(engine: str, tmp_path: Path) -> None:
    plain, _ = _weights(tmp_path / "a", engine, 0.0)
    smoothed, rows = _weights(tmp_path / "b", engine, 0.3)
    assert any(not torch.equal(plain[k], smoothed[k]) for k in plain)
    # Both executors run the same smoothed objective (float64: equal to rounding).
    other = "vectorized" if engine == "sequential" else "sequential"
    twin, _ = _weights(tmp_path / "c", other, 0.3)
    for k in smoothed:
        torch.testing.assert_close(smoothed[k], twin[k], rtol=1e-9, atol=1e-12)
    assert rows[-1]["test_loss"] > 0
