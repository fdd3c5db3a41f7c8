"""Running fedbench as a user would (a subprocess with this checkout first on the path, optional
fault injection and resource limits) and reading back what it wrote."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from benchmarks.faults.inject import INJECT

ROOT = Path(__file__).resolve().parents[2]

#: A run config of a few seconds: digits data, a linear model, checkpoints every round.
RUN_CONFIG = {
    "seed": 0,
    "data": {"name": "digits", "augment": False},
    "partition": {"kind": "dirichlet", "alpha": 0.6, "clients": 6},
    "model": {"name": "logreg"},
    "fl": {"rounds": 6, "participation": 0.5, "local_steps": 3, "batch_size": 16},
    "algorithm": {"name": "fedadamw", "lr": 1.0e-2, "grad_clip": 10.0},
    "eval": {"every": 1, "train_subset": 200},
    "runtime": {"checkpoint_every": 1, "device": "cpu"},
}


def table_config(name: str = "tiny", rounds: int = 6) -> dict:
    """A two-row, two-seed table of RUN_CONFIG-sized runs."""
    base = json.loads(json.dumps(RUN_CONFIG))
    base.pop("seed")
    base["fl"]["rounds"] = rounds
    return {
        "table": name,
        "title": "fault-script table",
        "base": base,
        "grid": {"partition.alpha": [0.6]},
        "methods": {
            "FedAvg": {"algorithm": {"name": "fedavg", "lr": 0.1, "weight_decay": 1.0e-3}},
            "FedAdamW": {"algorithm": {"name": "fedadamw", "alpha": 0.5}},
        },
        "seeds": [0, 1],
        "metrics": ["test_acc", "train_loss"],
        "presets": {"quick": {"fl.rounds": 2}},
    }


@dataclass
class Result:
    code: int
    out: str
    err: str
    timed_out: bool = False


class Fedbench:
    """Runs `python -m fedbench` with this checkout first on the path."""

    def __init__(self, root: Path, work: Path) -> None:
        self.root = root
        self.inject = work / "inject"
        self.inject.mkdir(parents=True, exist_ok=True)
        (self.inject / "sitecustomize.py").write_text(INJECT)

    def env(self, fault: dict[str, str] | None = None) -> dict[str, str]:
        paths = [str(self.root)] + ([str(self.inject)] if fault else [])
        env = {k: v for k, v in os.environ.items() if not k.startswith("FEDBENCH_FAULT")}
        env["PYTHONPATH"] = os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")])
        env["COLUMNS"] = "200"
        env.update(fault or {})
        return env

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "fedbench", *args]

    def __call__(
        self,
        *args: str,
        cwd: Path | None = None,
        fault: dict[str, str] | None = None,
        timeout: float = 600,
        memory_gb: float | None = None,
        file_kb: int | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> Result:
        def limit() -> None:  # a runaway allocation fails instead of swapping the machine
            if memory_gb is not None:
                size = int(memory_gb * 2**30)
                resource.setrlimit(resource.RLIMIT_DATA, (size, size))  # heap, not mapped libraries
            if file_kb is not None:  # a disk that fills: writes past the size fail with EFBIG
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (file_kb * 1024, file_kb * 1024))

        proc = subprocess.Popen(
            self.command(*args),
            cwd=cwd,
            env={**self.env(fault), **(extra_env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
            preexec_fn=limit,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
            return Result(proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return Result(proc.returncode, out, err, timed_out=True)


def one_clean_line(res: Result) -> str | None:
    """None when `res` is exit code 2 with one line on stderr and no traceback; else why not."""
    lines = [line for line in res.err.splitlines() if line.strip()]
    if res.timed_out:
        return "timed out"
    if "Traceback" in res.err or "Traceback" in res.out:
        return f"traceback ({len(lines)} lines): {lines[-1] if lines else ''}"
    if res.code != 2:
        return f"exit code {res.code}: {(lines or [''])[-1][:160]}"
    if len(lines) != 1:
        return f"{len(lines)} lines on stderr"
    return None


def tmp_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.name.endswith(".tmp"))


def metrics_rows(run_dir: Path) -> list[dict]:
    rows = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        row.pop("elapsed_s", None)
        rows.append(row)
    return rows


def run_dirs(out: Path) -> list[Path]:
    runs = out / "runs"
    return sorted(p for p in runs.iterdir() if p.is_dir()) if runs.is_dir() else []


def write_yaml(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


REPORT_FILES = ("summary.csv", "table.md", "table.tex")


def report_bytes(folder: Path) -> dict[str, str]:
    return {name: sha256(folder / name) for name in REPORT_FILES if (folder / name).is_file()}


def at_once(fb: Fedbench, commands: list[tuple[str, ...]], timeout: float) -> list[Result]:
    """Start every `fedbench ARGS` command at the same time and wait for all of them."""
    procs = [
        subprocess.Popen(
            fb.command(*args),
            env=fb.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in commands
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        results.append(Result(proc.returncode, out, err))
    return results


def settled(res: Result, *, ok: tuple[int, ...] = (0,)) -> str | None:
    """None when `res` ended in one of the `ok` exit codes without a traceback, or in one clean
    line (exit 2); else what went wrong ("traceback ...", "timed out", ...)."""
    if res.code in ok and not res.timed_out and "Traceback" not in res.err + res.out:
        return None
    return one_clean_line(res)


def readable_model(path: Path) -> bool:
    import torch

    try:
        return isinstance(torch.load(path, map_location="cpu", weights_only=True), dict)
    except Exception:
        return False
