"""Issue 13 item 7: Ctrl-C says what to do next, progress lines off a terminal, no invented ETA,
rounded final lines with epsilon for private runs."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from fedbench.config import RunConfig
from fedbench.engine.loop import Engine
from fedbench.engine.progress import PlainProgress, final_line
from fedbench.runner.launcher import Outcome, SweepProgress
from tests.conftest import TINY


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _plain(every_s: float = 10.0) -> tuple[PlainProgress, FakeClock, io.StringIO]:
    buffer = io.StringIO()
    clock = FakeClock()
    progress = PlainProgress(Console(file=buffer, width=200), "run", every_s=every_s, clock=clock)
    return progress, clock, buffer


def test_plain_progress_prints_rounds_between_evaluations_at_most_every_10_s() -> None:
    """The bug: off a terminal only evaluation rounds printed (nothing for minutes)."""
    progress, clock, buffer = _plain()
    progress.start(total=100, done=0)
    for r in range(1, 31):  # 4 s per round, no evaluation
        clock.now += 4.0
        progress.advance(r, None)
    lines = buffer.getvalue().splitlines()
    # 120 s in 4 s rounds with >= 10 s between lines: rounds 3, 6, ..., 30.
    assert [line.split()[2] for line in lines] == [f"{r}/100" for r in range(3, 31, 3)]
    assert lines[0] == "run round 3/100  4.00 s/round  eta 388 s"
    clock.now += 1.0  # an evaluation prints at once, with its scores
    progress.advance(31, {"test_acc": 51.234, "test_loss": 1.5, "train_loss": 1.25})
    last = buffer.getvalue().splitlines()[-1]
    assert last.startswith("run round 31/100  test_acc 51.23  test_loss 1.5000  train_loss 1.2500")


def _sweep_lines(outcomes: list[Outcome]) -> list[str]:
    buffer = io.StringIO()
    progress = SweepProgress(Console(file=buffer, width=300), len(outcomes), 1, "t")

    class Run:
        method, setting, seed = "FedAvg", {"partition.alpha": 0.6}, 0
        cfg = RunConfig()  # the labels name what ran, from the resolved config

    for outcome in outcomes:
        progress.update(Run(), outcome)  # type: ignore[arg-type]
    return buffer.getvalue().splitlines()


def test_rerun_of_finished_runs_prints_no_eta() -> None:
    """The bug: instant 'already done' runs gave an ETA of 0 s for the runs still to train."""
    cached = [Outcome(f"r{i}", "completed", cached=True, wall_s=0.01) for i in range(3)]
    lines = _sweep_lines(cached)
    assert len(lines) == 3 and not any("eta" in line for line in lines)
    # A cached run, a trained run of 60 s, a cached one, a trained one: the ETA uses the
    # trained runs' rate only, and says nothing before the first or after the last.
    lines = _sweep_lines(
        [
            cached[0],
            Outcome("r8", "completed", wall_s=60.0),
            cached[1],
            Outcome("r9", "completed", wall_s=60.0),
        ]
    )
    assert "eta" not in lines[0]
    assert lines[1].endswith("; eta 2 min")  # 60 s per trained run, 2 runs left
    assert lines[2].endswith("; eta 1 min")
    assert "eta" not in lines[3]  # nothing left
    assert lines[1].startswith("[2/4 runs] FedAvg Dir-0.6 seed 0: completed in 60 s")


def test_the_bar_labels_its_counts_and_takes_its_eta_from_finished_runs() -> None:
    """'4/18 runs done 16' did not say what was counted; rich's remaining time read 0:00:35
    with minutes left."""
    progress = SweepProgress(None, total=20, workers=2, label="t")
    for i in range(16):
        progress.finished(f"r{i}", Outcome(f"r{i}", "completed", cached=True))
    for i in range(2):
        progress.finished(f"t{i}", Outcome(f"t{i}", "completed", wall_s=75.0))
    progress.set_running(2)
    # 75 s per trained run, 2 left on 2 workers: 75 s.
    assert progress._counts() == (
        "runs: 2 of 4 to train done, 2 running, 0 failed; 16 already done; eta 1 min 15 s"
    )


def test_final_line_rounds_and_shows_epsilon_for_private_runs() -> None:
    summary = {
        "final": {"test_acc": 84.123456, "train_loss": 0.4567891},
        "d": 650,
        "wall_s": 12.3456,
        "epsilon": 7.891234,
        "delta": 1e-5,
    }
    # A summary without privacy_accounting (written before it existed) says so.
    assert final_line(summary) == (
        "test_acc 84.12  train_loss 0.4568  epsilon 7.89 (delta 1e-05; not recorded)  d 650  "
        "wall 12.35 s"
    )
    summary["privacy_accounting"] = {"accounting": "approximate", "why": "fixed-size batches"}
    assert "epsilon 7.89 (delta 1e-05; approximate, may be understated)" in final_line(summary)
    summary["epsilon"] = None
    assert "epsilon" not in final_line(summary)


@pytest.mark.slow
def test_ctrl_c_prints_checkpoint_and_resume_command(run_cli, tmp_path, monkeypatch) -> None:
    """The bug: Ctrl-C printed nothing. Interrupt round 4 of 4 after a checkpoint at round 3."""
    real_round = Engine._round

    def interrupted_round(self, r, lr, diagnostics=False):
        if r == 3:
            raise KeyboardInterrupt
        return real_round(self, r, lr, diagnostics)

    monkeypatch.setattr(Engine, "_round", interrupted_round)
    args = ["train", *TINY, "--set", "runtime.checkpoint_every=1", "--out", str(tmp_path)]
    code, _, err = run_cli(*args)
    assert code == 130
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    run_dir = next((tmp_path / "runs").iterdir())
    assert lines[0].startswith(f"interrupted run {run_dir.name} (last evaluated round 2/4); ")
    assert f"checkpoint at round 3: {run_dir / 'checkpoint.pt'}; " in lines[0]
    assert lines[0].endswith("resume: fedbench " + " ".join(args))
    assert not (run_dir / "summary.json").exists()
    monkeypatch.setattr(Engine, "_round", real_round)
    code, _, err = run_cli(*args)  # the printed command resumes and finishes the run
    assert code == 0, err
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"


def test_ctrl_c_before_any_checkpoint_says_the_rerun_starts_over(
    run_cli, tmp_path, monkeypatch
) -> None:
    def interrupted_round(self, r, lr, diagnostics=False):
        raise KeyboardInterrupt

    monkeypatch.setattr(Engine, "_round", interrupted_round)
    code, _, err = run_cli(
        "train", *TINY, "--set", "runtime.checkpoint_every=0", "--out", str(tmp_path)
    )
    assert code == 130
    assert "no checkpoint yet (runtime.checkpoint_every), the rerun starts at round 0" in err
    assert "(last evaluated round 0/4)" in err


def test_ctrl_c_in_a_sweep_says_what_is_kept_and_how_to_resume(
    run_cli, tiny_table_path, tmp_path, monkeypatch
) -> None:
    import fedbench.runner.sweep as sweep

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "run_sweep", interrupted)
    args = ["run", str(tiny_table_path), "--out", str(tmp_path)]
    code, _, err = run_cli(*args)
    assert code == 130
    (line,) = err.strip().splitlines()
    assert line.startswith("interrupted tiny after 0 of 4 runs; finished runs are kept")
    assert line.endswith("resume: fedbench " + " ".join(args))
