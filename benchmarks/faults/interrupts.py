"""Interrupts: Ctrl-C (SIGINT to the process group) while train writes a checkpoint and in train,
run, tune, figure and report: exit 130 and one line with a resume command."""

from __future__ import annotations

import os
import signal
import subprocess

from benchmarks.faults.context import Context, driver
from benchmarks.faults.harness import Result, settled

INTERRUPT_IN_CHECKPOINT = """
import os, signal, torch
_real = torch.save
class _Interrupting:  # Ctrl-C (SIGINT) arrives while torch.save writes the round-3 checkpoint
    def __init__(self, fh): self.fh, self.n = fh, 0
    def write(self, data):
        self.n += 1
        if self.n == 3:
            os.kill(os.getpid(), signal.SIGINT)
        return self.fh.write(data)
    def flush(self): self.fh.flush()
def _save(obj, f, *a, **k):
    if isinstance(obj, dict) and obj.get("round") == 3 and hasattr(f, "write"):
        return _real(obj, _Interrupting(f), *a, **k)
    return _real(obj, f, *a, **k)
torch.save = _save
"""


def _interrupted(res: Result) -> str | None:
    """None for a Ctrl-C that ended as one line with a resume command and exit code 130."""
    lines = [x for x in res.err.splitlines() if x.strip()]
    if res.timed_out:
        return "timed out"
    if "Traceback" in res.err + res.out:
        return f"traceback: {(lines or [''])[-1][:160]}"
    if res.code != 130:
        return f"exit {res.code}: {(lines or [''])[-1][:160]}"
    if len(lines) != 1 or "resume" not in lines[0]:
        return f"no one resume line ({len(lines)} lines)"
    return None


def _sigint_after(ctx: Context, args: tuple[str, ...], seconds: float) -> Result:
    """Start `fedbench ARGS`, press Ctrl-C (SIGINT to its process group) after `seconds`."""
    proc = subprocess.Popen(
        ctx.fb.command(*args),
        env=ctx.fb.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return Result(proc.returncode, out, err, timed_out=True)
    return Result(proc.returncode, out, err)


def case_interrupts(ctx: Context) -> None:
    fb, run_yaml, table = ctx.fb, str(ctx.run_yaml), str(ctx.table_yaml)
    cat = "interrupts"
    out = ctx.folder("int-ckpt")
    got = driver(ctx, INTERRUPT_IN_CHECKPOINT, ["train", run_yaml, "--out", str(out)])
    res = Result(got.returncode, got.stdout, got.stderr)
    problem = _interrupted(res)
    if problem is None:
        again = fb("train", run_yaml, "--out", str(out))
        problem = settled(again) or ctx.matches_reference(out)
        problem = problem if problem is None or again.code else None
    ctx.tally.record(cat, "Ctrl-C while train writes its round-3 checkpoint", problem)

    # Workloads of minutes: the Ctrl-C lands while they run (exit 0 would be an ignored Ctrl-C).
    for args, seconds in (
        (("train", run_yaml, "--set", "fl.rounds=200"), 8.0),
        (("run", table, "--workers", "1", "--set", "fl.rounds=200"), 8.0),
        (("tune", table, "--grid", "algorithm.lr=0.1,0.05,0.02", "--rounds", "200"), 10.0),
        (("figure", "fedadamom-escape"), 8.0),
    ):
        out = ctx.folder("int-cmd")
        res = _sigint_after(ctx, (*args, "--out", str(out)), seconds)
        ctx.tally.record(cat, f"Ctrl-C in {args[0]} after {seconds:g} s", _interrupted(res))
    rep = ctx.folder("int-report")
    fb("run", table, "--out", str(rep), "--preset", "quick", "--workers", "1")
    res = _sigint_after(ctx, ("report", str(rep / "tiny-quick")), 3.0)
    problem = None if res.code == 0 and "Traceback" not in res.err else _interrupted(res)
    ctx.tally.record(cat, "Ctrl-C in report after 3 s", problem)
