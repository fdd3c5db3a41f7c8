"""What every case shares: the tally of held and failed cases, the work folder with its undisturbed
reference run, a bad-input check, and runs killed or faulted from inside fedbench."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.faults.harness import (
    RUN_CONFIG,
    Fedbench,
    Result,
    metrics_rows,
    one_clean_line,
    run_dirs,
    table_config,
    tmp_files,
    write_yaml,
)


@dataclass
class Tally:
    counts: dict[str, list[int]] = field(default_factory=dict)  # category -> [held, tried]
    failures: list[str] = field(default_factory=list)

    def record(self, category: str, case: str, problem: str | None) -> None:
        held, tried = self.counts.setdefault(category, [0, 0])
        self.counts[category] = [held + (problem is None), tried + 1]
        mark = "ok  " if problem is None else "FAIL"
        print(f"  {mark} {category}: {case}" + (f": {problem}" if problem else ""), flush=True)
        if problem is not None:
            self.failures.append(f"{category}: {case}: {problem}")


class Context:
    def __init__(self, root: Path, work: Path, kills: int) -> None:
        self.work = work
        self.fb = Fedbench(root, work)
        self.tally = Tally()
        self.kills = kills
        self.run_yaml = write_yaml(work / "run.yaml", RUN_CONFIG)
        self.table_yaml = write_yaml(work / "tiny.yaml", table_config())
        self._reference: Path | None = None

    def folder(self, name: str) -> Path:
        path = self.work / name
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path

    def reference(self) -> Path:
        """An undisturbed run of RUN_CONFIG (its run folder)."""
        if self._reference is None:
            out = self.folder("reference")
            res = self.fb("train", str(self.run_yaml), "--out", str(out))
            if res.code != 0:
                raise SystemExit(f"the reference run failed: {res.err[-2000:]}")
            self._reference = run_dirs(out)[0]
        return self._reference

    def matches_reference(self, out: Path) -> str | None:
        dirs = run_dirs(out)
        if len(dirs) != 1:
            return f"{len(dirs)} run folders"
        ref = self.reference()
        try:
            rows = metrics_rows(dirs[0])
        except (OSError, ValueError) as exc:  # a folder, or not JSON: what the rerun left
            return f"metrics.jsonl unreadable after the rerun ({type(exc).__name__})"
        if rows != metrics_rows(ref):
            return "metrics.jsonl differs from an undisturbed run"
        try:
            summary = json.loads((dirs[0] / "summary.json").read_text())
        except (OSError, ValueError) as exc:
            return f"summary.json unreadable after the rerun ({type(exc).__name__})"
        if not isinstance(summary, dict) or summary.get("status") != "completed":
            return f"status {summary.get('status')}"
        if summary["final"] != json.loads((ref / "summary.json").read_text())["final"]:
            return "final metrics differ from an undisturbed run"
        return None


def killed_run(ctx: Context, name: str, seed: int = 0) -> Path:
    """An output folder whose run died (SIGKILL) right after writing its round-3 checkpoint."""
    out = ctx.folder(name)
    cfg = write_yaml(ctx.work / f"seed{seed}.yaml", {**RUN_CONFIG, "seed": seed})
    driver = textwrap.dedent(
        f"""
        import os, signal, sys
        from fedbench.engine import loop
        real = loop.save_checkpoint
        def save_then_die(path, state):
            real(path, state)
            if state["round"] == 3:
                os.kill(os.getpid(), signal.SIGKILL)
        loop.save_checkpoint = save_then_die
        sys.argv = ["fedbench", "train", {str(cfg)!r}, "--out", {str(out)!r}]
        from fedbench.cli import main
        main()
        """
    )
    subprocess.run([sys.executable, "-c", driver], env=ctx.fb.env(), capture_output=True)
    run = run_dirs(out)[0]
    if not (run / "checkpoint.pt").is_file():
        raise SystemExit(f"could not make a killed run in {out}")
    return out


def checksum(run: Path) -> None:
    data = (run / "checkpoint.pt").read_bytes()
    record = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "round": 3}
    (run / "checkpoint.json").write_text(json.dumps(record))


def check_clean(
    ctx: Context,
    case: str,
    args: tuple[str, ...],
    *,
    out: Path | None = None,
    absent: tuple[Path, ...] = (),
    timeout: float = 120,
    memory_gb: float | None = 4,
    fault: dict[str, str] | None = None,
    ok_if_running: bool = False,
) -> Result:
    """Record whether `fedbench ARGS` ends in one clean line (exit 2), leaves no temp file
    under `out` and writes none of `absent`."""
    res = ctx.fb(*args, timeout=timeout, memory_gb=memory_gb, fault=fault)
    if ok_if_running and res.timed_out and "Traceback" not in res.err:
        problem = None  # still running within its memory limit: a long run, not a blow-up
    else:
        problem = one_clean_line(res)
    if problem is None and out is not None and (left := tmp_files(out)):
        problem = f"left {len(left)} temp file(s): {left[0].name}"
    if problem is None and (written := [p for p in absent if p.exists()]):
        problem = f"wrote {written[0]}"
    ctx.tally.record("bad inputs", case, problem)
    return res


def driver(ctx: Context, code: str, args: list[str]) -> subprocess.CompletedProcess:
    """Run `fedbench ARGS` in a process that first runs `code` (a fault planted in fedbench)."""
    driver = textwrap.dedent(code) + textwrap.dedent(
        f"""
        import sys
        sys.argv = ["fedbench", *{args!r}]
        from fedbench.cli import main
        main()
        """
    )
    return subprocess.run(
        [sys.executable, "-c", driver], env=ctx.fb.env(), capture_output=True, text=True
    )
