from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedbench.report import build_report
from fedbench.runner import launcher
from fedbench.runner.launcher import Outcome
from fedbench.runner.sweep import run_sweep, threads_note
from fedbench.runner.table_config import expand, parse_table_config
from tests.conftest import tiny_table_data
from tests.report.helpers import fake_run


def tiny_plan(**changes):
    data = tiny_table_data()
    data.update(changes)
    return expand(parse_table_config(data))


@pytest.mark.slow
def test_end_to_end_tiny_sweep_skip_and_report(tmp_path: Path):
    data = tiny_table_data()
    data["methods"]["Hessian"] = {"algorithm": {"name": "fedadamw", "blocks": "hessian"}}
    # Refused before training (per-sample clipping cannot run through BatchNorm): unsupported.
    data["methods"]["DP on BN"] = {
        "model": {"name": "resnet18", "norm": "bn"},
        "algorithm": {"name": "dp_fedavg"},
    }
    data["methods"]["Exploding"] = {
        "algorithm": {"name": "fedavg", "lr": 1.0e38, "weight_decay": 0}
    }
    plan = expand(parse_table_config(data))
    result = run_sweep(plan, tmp_path, workers=1)
    statuses = {run.method: result.outcomes[run.run_id].status for run in plan.runs}
    assert statuses == {
        "Local SGD": "completed",
        "FedAdamW": "completed",
        "Hessian": "completed",
        "DP on BN": "unsupported",
        "Exploding": "diverged",
    }
    assert result.exit_code == 1 and len(result.problems) == 2
    assert all("Exploding" in what for what, _ in result.problems)
    for run in plan.runs:
        if run.method in ("Local SGD", "FedAdamW", "Hessian"):
            assert (tmp_path / "runs" / run.run_id / "summary.json").is_file()

    report = build_report(result.folder)
    names = {f.name for f in report.files}
    assert names == {"summary.csv", "table.csv", "table.md", "table.tex"} | {
        "curves.png",
        "curves.pdf",
        "curves.caption.txt",
    }
    table_md = (result.folder / "table.md").read_text()
    assert "unsupported: " in table_md and "BatchNorm" in table_md
    assert "diverged" in table_md
    summary = report.summary
    acc = summary[(summary["method"] == "FedAdamW") & (summary["metric"] == "test_acc")].iloc[0]
    assert acc["n"] == 2
    # The paper number beside ours: the tiny table maps "Local SGD" to Table 1's FedAvg at Dir-0.6;
    # its column has no model, so only the Comm cell matches uniquely.
    comm = summary[(summary["method"] == "Local SGD") & (summary["metric"] == "comm")].iloc[0]
    assert comm["mean"] == pytest.approx(1.0) and comm["paper_mean"] == 1.0

    # A second sweep skips every finished run; the unsupported one is tried again (it is cheap).
    again = run_sweep(plan, tmp_path, workers=1)
    for run in plan.runs:
        outcome = again.outcomes[run.run_id]
        assert outcome.cached == (run.method != "DP on BN")
    plan_json = json.loads((result.folder / "plan.json").read_text())
    assert {r["status"] for r in plan_json["runs"]} == {"completed", "unsupported", "diverged"}


def test_a_failed_run_does_not_stop_the_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    plan = tiny_plan()
    calls = []

    def fake_run_one(cfg_data, out, wait=True):
        calls.append(cfg_data["seed"])
        run_id = expand.__globals__["parse_run_config"](cfg_data).run_id()
        if cfg_data["seed"] == 0:
            return Outcome(run_id, "failed", "RuntimeError: boom")
        return Outcome(run_id, "completed")

    monkeypatch.setattr(launcher, "run_one", fake_run_one)
    result = run_sweep(plan, tmp_path, workers=1)
    # The failing runs are retried once (and fail again): 2 x 2 + 2 calls.
    assert len(plan.runs) == 4 and sorted(calls) == [0, 0, 0, 0, 1, 1]
    assert result.exit_code == 1
    assert [o.error for _, o in result.problems] == ["RuntimeError: boom"] * 2
    statuses = [r["status"] for r in json.loads((result.folder / "plan.json").read_text())["runs"]]
    assert statuses.count("failed") == 2


def test_a_table_name_cannot_escape_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    plan = tiny_plan(table="../escaped")
    monkeypatch.setattr(
        launcher, "run_one", lambda cfg_data, out, wait=True: Outcome("x", "completed")
    )
    out = tmp_path / "out"
    result = run_sweep(plan, out, workers=1)
    # The sanitised name carries a hash of the original: "../escaped" is not "escaped".
    assert result.folder.parent == out and result.folder.name.startswith("escaped-")
    assert (result.folder / "plan.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_sweep_that_reused_runs_of_another_thread_count_says_so(tmp_path: Path):
    """`--workers 1` and then `--workers 2` train one run id at 2 and at 1 threads: the second
    sweep reuses the first's runs (their numbers differ in the last digits) and says so."""
    runs = tiny_plan(seeds=[0, 1, 2]).runs[:3]
    for run, threads in zip(runs, (2, 2, 1), strict=True):
        folder = tmp_path / "runs" / run.run_id
        fake_run(folder, run.cfg, 50.0)
        summary = json.loads((folder / "summary.json").read_text())
        summary.update(torch_threads=threads, device="cpu")
        (folder / "summary.json").write_text(json.dumps(summary))

    def outcomes(cached: tuple[bool, ...]) -> dict[str, Outcome]:
        return {
            r.run_id: Outcome(r.run_id, "completed", cached=c)
            for r, c in zip(runs, cached, strict=False)
        }

    note = threads_note(outcomes((True, True, False)), tmp_path / "runs")
    assert note is not None and note.startswith(
        "note: this sweep reused finished runs trained at other torch thread counts (2 at 2 "
        "threads) than the runs it trained (1 at 1 thread); "
    )
    assert threads_note(outcomes((True, False, False)), tmp_path / "runs") is not None
    assert threads_note(outcomes((False, False, False)), tmp_path / "runs") is None  # none reused
    assert threads_note(outcomes((True, True, True)), tmp_path / "runs") is None  # none trained
    assert threads_note(outcomes((True, False)), tmp_path / "runs") is None  # both at 2
