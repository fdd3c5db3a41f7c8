"""`fedbench bench --json`: one parseable JSON object as the last line, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIELDS = {
    "client_steps_per_s": float,
    "bare_steps_per_s": float,
    "overhead": float,
    "peak_mem_mb": float,
    "engine": str,
    "device": str,
}
TINY = [
    "--set", "model.name=logreg",
    "--set", "partition.clients=4",
    "--set", "fl.participation=0.5",
    "--set", "fl.local_steps=2",
    "--set", "fl.batch_size=16",
    "--rounds", "1", "--warmup", "1", "--repeats", "1",
    "--json",
]  # fmt: skip


@pytest.mark.parametrize("engine", ["sequential", "vectorized"])
def test_bench_json_has_the_fields(
    engine: str, tmp_path: Path, run_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("bench", *TINY, "--set", f"runtime.engine={engine}")
    assert code == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    for field, kind in FIELDS.items():
        assert isinstance(result[field], kind), field
    assert result["engine"] == engine
    assert result["client_steps"] == 2 * 2  # S=2 clients x K=2 steps x 1 round
    assert result["overhead"] > 0 and result["peak_mem_mb"] > 0
    # the plan's CUDA graphs (none on a CPU) and the vectorised step graphs' counts (none)
    assert result["cuda_graphs"] == "off" and result["step_graphs"] is None
    assert list(tmp_path.iterdir()) == []  # no run folder, no results/
