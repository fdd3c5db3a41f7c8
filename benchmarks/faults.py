"""Fault script: fedbench as an adversarial user and an unlucky machine would treat it.

Every case runs the real command line (`python -m fedbench ...`, this checkout first on the path)
in temporary folders and checks what the user would see:

- kills: SIGKILLs of a whole sweep (its process group) at seeded random moments, then a rerun to
  completion; the report must be byte-identical to an undisturbed sweep's.
- corruptions: a run killed right after its round-3 checkpoint, then its checkpoint, checksum
  file or metrics.jsonl damaged in one way each; the rerun must exit 0 with the metrics of an
  undisturbed run.
- bad inputs: malformed or hostile configs and flags, read-only and full disks (simulated by a
  `sitecustomize` that makes writes under one folder fail with EROFS or ENOSPC); each must end in
  exit code 2 and one line on stderr, no traceback, no temp file left, nothing written for a
  refused command, and (for the disk faults) a run that resumes to the undisturbed result.
- payloads: YAML python tags and pickles where fedbench reads YAML, checkpoints and arrays; each
  payload would create a marker file if it ran.
- paths: table and figure names that point outside --out; any file created outside --out counts.
- concurrency: two identical sweeps into one --out train each run once; two different sweeps
  sharing runs never report each other's plan.
- dataloss: kills and full disks while model.pt, a report or tuned.yaml is written, two tables
  whose names sanitise alike, a sweep under an ASCII locale; the previous complete file must
  survive and the rerun complete it ("LOST" marks a file destroyed).
- readback: damaged run files (summary.json, metrics.jsonl rows, attempt.json, a folder where a
  file belongs), plans, tuned.yaml and study.db; recovered (the run retrained to the undisturbed
  result) or one clean line.
- names: 300-character names, a 120 kB --set value, --out a file or below one, --write-plan a
  folder or read-only, compare FOLDER:ROW with ':' in FOLDER.
- interrupts: Ctrl-C (SIGINT to the process group) while train writes a checkpoint and in train,
  run, tune, figure and report: exit 130 and one line with a resume command.
- study: two tunes of one new study at once, a file-size limit while study.db grows, a 10**8-point
  grid and 10**9 trials (60 s each).
- bombs: an npz with a label of 10**9 or no samples, image_size=100000, samples_per_client=10**9,
  a figure with 10**9 trials (3 GB of memory, 60 s).
- api: the Python API with wrong types: a FedbenchError or a TypeError naming the argument.
- litter: stale temporaries and a finished run's leftover checkpoint cleaned by the rerun, a
  foreign run folder in a listing, an ENOSPC line naming its path.

Run: python benchmarks/faults.py [--only kills,corruptions,...] [--kills 4] [--keep] [--root DIR]
It prints one line per case, the counts and the failures by kind (tracebacks, data lost, hangs,
other); exit code 0 when every case held.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

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


# --- running fedbench --------------------------------------------------------------------------

INJECT = '''
"""Fault injection for benchmarks/faults.py: writes under FEDBENCH_FAULT_DIR fail."""
import builtins, errno, io, os, sqlite3

_DIR = os.environ.get("FEDBENCH_FAULT_DIR")
if _DIR:
    _ROOT = os.path.realpath(_DIR)
    _KIND = os.environ.get("FEDBENCH_FAULT_KIND", "enospc")  # enospc | rofs
    _MATCH = os.environ.get("FEDBENCH_FAULT_MATCH", "")
    _BUDGET = [int(os.environ.get("FEDBENCH_FAULT_BYTES", "0"))]
    _CODE = errno.EROFS if _KIND == "rofs" else errno.ENOSPC

    def _hit(path):
        if isinstance(path, int):
            return False
        try:
            real = os.path.realpath(os.fspath(path))
        except TypeError:
            return False
        inside = real == _ROOT or real.startswith(_ROOT + os.sep)
        return inside and _MATCH in real

    def _fail(path):
        raise OSError(_CODE, os.strerror(_CODE), os.fspath(path))

    class _Full:
        """A file on a disk with _BUDGET bytes free (for every file of this process)."""

        def __init__(self, fh, path):
            self._fh, self._path = fh, path

        def write(self, data):
            if len(data) > _BUDGET[0]:
                _fail(self._path)
            _BUDGET[0] -= len(data)
            return self._fh.write(data)

        def __getattr__(self, name):
            return getattr(self._fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self._fh.__exit__(*exc)

    _open = io.open

    def _patched_open(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+") and _hit(file):
            if _KIND == "rofs":
                _fail(file)
            return _Full(_open(file, mode, *args, **kwargs), file)
        return _open(file, mode, *args, **kwargs)

    builtins.open = io.open = _patched_open

    if _KIND == "rofs":
        _WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

        def _guard(real, *which):
            def wrapper(*args, **kwargs):
                if any(_hit(args[i]) for i in which if i < len(args)):
                    _fail(args[which[0]])
                return real(*args, **kwargs)
            return wrapper

        _os_open = os.open

        def _patched_os_open(path, flags, *args, **kwargs):
            if flags & _WRITE and _hit(path):
                _fail(path)
            return _os_open(path, flags, *args, **kwargs)

        os.open = _patched_os_open
        for _name, _which in (("mkdir", (0,)), ("replace", (0, 1)), ("rename", (0, 1)),
                              ("unlink", (0,)), ("remove", (0,)), ("rmdir", (0,))):
            setattr(os, _name, _guard(getattr(os, _name), *_which))
        _connect = sqlite3.connect

        def _patched_connect(database, *args, **kwargs):
            if _hit(database):
                raise sqlite3.OperationalError("attempt to write a readonly database")
            return _connect(database, *args, **kwargs)

        sqlite3.connect = sqlite3.dbapi2.connect = _patched_connect
'''


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


# --- the tally ---------------------------------------------------------------------------------


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


# --- kills -------------------------------------------------------------------------------------

REPORT_FILES = ("summary.csv", "table.md", "table.tex")


def report_bytes(folder: Path) -> dict[str, str]:
    return {name: sha256(folder / name) for name in REPORT_FILES if (folder / name).is_file()}


def case_kills(ctx: Context) -> None:
    """SIGKILL a whole two-worker sweep at random moments, rerun it to the end: same report."""
    fb, table = ctx.fb, str(ctx.table_yaml)
    ref = ctx.folder("kills-ref")
    fb("run", table, "--out", str(ref), "--workers", "2")  # threads per run change the floats
    expected = report_bytes(ref / "tiny")
    out = ctx.folder("kills")
    rng = random.Random(0)
    for i in range(ctx.kills):
        proc = subprocess.Popen(
            fb.command("run", table, "--out", str(out), "--workers", "2"),
            env=fb.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        time.sleep(rng.uniform(1.0, 6.0))
        finished = proc.poll() is not None
        if not finished:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        res = fb("run", table, "--out", str(out), "--workers", "2")
        got = report_bytes(out / "tiny")
        problem = None
        if res.code != 0:
            problem = f"the rerun exited {res.code}: {res.err.strip()[-200:]}"
        elif got != expected or len(got) != len(REPORT_FILES):
            problem = "report differs from an undisturbed sweep's"
        ctx.tally.record(
            "kills", f"kill {i + 1}" + (" (sweep had ended)" if finished else ""), problem
        )
        shutil.rmtree(out / "runs")  # the next kill starts from scratch


# --- corruptions -------------------------------------------------------------------------------


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


def rewrite_checkpoint(run: Path, change: Callable[[object], object]) -> None:
    """Load checkpoint.pt, change it, save it back with a matching checksum file."""
    import torch

    state = torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=True)
    torch.save(change(state), run / "checkpoint.pt")
    checksum(run)


def checksum(run: Path) -> None:
    data = (run / "checkpoint.pt").read_bytes()
    record = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data), "round": 3}
    (run / "checkpoint.json").write_text(json.dumps(record))


def _truncate(run: Path) -> None:
    p = run / "checkpoint.pt"
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _flip(run: Path) -> None:
    p = run / "checkpoint.pt"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0xFF
    p.write_bytes(bytes(data))


def _without(key: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        rewrite_checkpoint(run, lambda s: {k: v for k, v in s.items() if k != key})

    return damage


def _set(key: str, value: object) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        rewrite_checkpoint(run, lambda s: {**s, key: value})

    return damage


def _wrong_shapes(run: Path) -> None:
    import torch

    rewrite_checkpoint(run, lambda s: {**s, "x": [torch.zeros(3) for _ in s["x"]]})


def _a_list(run: Path) -> None:
    rewrite_checkpoint(run, lambda s: list(s["x"]))


def _empty_checkpoint(run: Path) -> None:
    (run / "checkpoint.pt").write_bytes(b"")
    checksum(run)


def _checksum_text(text: str) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        (run / "checkpoint.json").write_text(text)

    return damage


def _torn_metrics(run: Path) -> None:
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write('{"round": 4, "test_acc": 0.4')


def _torn_metrics_no_checkpoint(run: Path) -> None:
    _torn_metrics(run)
    (run / "checkpoint.pt").unlink()
    (run / "checkpoint.json").unlink()


def _binary_metrics_tail(run: Path) -> None:
    with open(run / "metrics.jsonl", "ab") as fh:
        fh.write(b"\x00\xff\xfe garbage")


def _stale_tmp(run: Path) -> None:
    (run / "checkpoint.pt.tmp").write_bytes(b"half a checkpoint")


def _torn_json_files(run: Path) -> None:
    (run / "attempt.json").write_text('{"attempts": ')
    (run / "summary.json").write_text('{"status": "comp')


def case_corruptions(ctx: Context) -> None:
    """Each damage to a killed run's folder: the rerun recovers the undisturbed result."""
    base = killed_run(ctx, "killed-base")
    other = run_dirs(killed_run(ctx, "killed-other", seed=1))[0]

    def _foreign(run: Path) -> None:  # both files of a run with another seed (same shapes)
        shutil.copy(other / "checkpoint.pt", run / "checkpoint.pt")
        shutil.copy(other / "checkpoint.json", run / "checkpoint.json")

    damages: dict[str, Callable[[Path], None]] = {
        "checkpoint.pt truncated": _truncate,
        "a byte of checkpoint.pt flipped": _flip,
        "checkpoint.json missing": lambda run: (run / "checkpoint.json").unlink(),
        "checkpoint.json not JSON": _checksum_text("{not json"),
        "checkpoint.json holding a list": _checksum_text("[1, 2, 3]"),
        "checkpoint.json empty": _checksum_text(""),
        "checkpoint.pt empty, checksummed": _empty_checkpoint,
        "checksummed dict without x": _without("x"),
        "checksummed dict without round": _without("round"),
        "checksummed list instead of a dict": _a_list,
        "checksummed dict, x of the wrong shapes": _wrong_shapes,
        "checksummed dict, round a string": _set("round", "three"),
        "checksummed dict, metrics_rows past metrics.jsonl": _set("metrics_rows", 99),
        "checksummed dict, torch_rng not a generator state": _set("torch_rng", [1, 2]),
        "checkpoint copied from another run": _foreign,
        "torn last line in metrics.jsonl": _torn_metrics,
        "torn last line, no checkpoint": _torn_metrics_no_checkpoint,
        "binary garbage after the last line": _binary_metrics_tail,
        "stale checkpoint.pt.tmp": _stale_tmp,
        "torn attempt.json and summary.json": _torn_json_files,
    }
    for case, damage in damages.items():
        out = ctx.work / "corrupt"
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(base, out)
        run = run_dirs(out)[0]
        damage(run)
        before = sha256(run / "metrics.jsonl")
        res = ctx.fb("train", str(ctx.run_yaml), "--out", str(out))
        problem = None
        if res.code != 0 or "Traceback" in res.err:
            tail = res.err.strip().splitlines()[-1:] or [""]
            problem = f"exit {res.code}: {tail[0][:200]}"
            if (run / "metrics.jsonl").is_file() and sha256(run / "metrics.jsonl") != before:
                problem += "; metrics.jsonl was changed by the failed attempt"
        else:
            problem = ctx.matches_reference(out)
        if problem is None and (left := tmp_files(out)):
            problem = f"left {', '.join(p.name for p in left)}"
        ctx.tally.record("corruptions", case, problem)

    # Readers of a folder with a torn metrics line (a run that died mid-write).
    out = ctx.work / "torn-readers"
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(base, out)
    run = run_dirs(out)[0]
    _torn_metrics(run)
    for args in (
        ("runs", str(out)),
        ("plot", str(run), "--out", str(ctx.work / "torn.png")),
    ):
        res = ctx.fb(*args)
        bad = res.code != 0 or "Traceback" in res.err
        ctx.tally.record(
            "corruptions",
            f"`fedbench {args[0]}` of a run with a torn metrics line",
            f"exit {res.code}: {res.err.strip()[-200:]}" if bad else None,
        )
    table = ctx.folder("torn-report")
    ctx.fb("run", str(ctx.table_yaml), "--out", str(table), "--preset", "quick", "--workers", "1")
    for run in run_dirs(table):
        _torn_metrics(run)
    res = ctx.fb("report", str(table / "tiny-quick"))
    bad = res.code != 0 or "Traceback" in res.err
    ctx.tally.record(
        "corruptions",
        "`fedbench report` over runs with torn metrics lines",
        f"exit {res.code}: {res.err.strip()[-200:]}" if bad else None,
    )


# --- bad inputs and I/O faults -----------------------------------------------------------------


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


def case_bad_inputs(ctx: Context) -> None:
    w = ctx.work
    out = ctx.folder("bad")

    # Config text.
    binary = w / "binary.yaml"
    binary.write_bytes(b"seed: 0\nfl:\n  rounds: \xff\xfe3\n")
    check_clean(ctx, "run config with non-UTF-8 bytes", ("train", str(binary), "--out", str(out)))
    binary_table = w / "binary-table.yaml"
    binary_table.write_bytes(ctx.table_yaml.read_bytes() + b"# \xc3\x28\xff\n")
    check_clean(
        ctx, "table config with non-UTF-8 bytes", ("run", str(binary_table), "--out", str(out))
    )
    bomb = w / "bomb.yaml"
    # Under model.lora, a field that takes any mapping: 452 bytes that expand to 10**9 strings.
    lines = [
        "model:",
        "  name: logreg",
        "  lora:",
        '    a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]',
    ]
    for i in range(1, 10):
        lines.append(f"    a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]")
    bomb.write_text("\n".join(lines) + "\n")
    check_clean(ctx, "YAML alias bomb (9 levels of 10)", ("train", str(bomb), "--out", str(out)))


def case_numbers(ctx: Context) -> None:
    run_yaml, table = str(ctx.run_yaml), str(ctx.table_yaml)
    out = ctx.folder("bad")
    for key, value in (
        ("algorithm.lr", ".inf"),
        ("algorithm.lr", "inf"),
        ("algorithm.weight_decay", ".inf"),
        ("algorithm.alpha", ".inf"),
        ("algorithm.lr", ".nan"),
        ("seed", "100000000000000000000"),
    ):
        where = ctx.folder("bad-number")
        check_clean(
            ctx,
            f"--set {key}={value}",
            ("train", run_yaml, "--set", f"{key}={value}", "--out", str(where)),
            absent=(where / "runs",),
        )
    for key in ("fl.local_steps", "fl.rounds"):
        where = ctx.folder("bad-huge")
        check_clean(
            ctx,
            f"--set {key}=1000000000 (train, 3 GB limit, 40 s)",
            ("train", run_yaml, "--set", f"{key}=1000000000", "--out", str(where)),
            timeout=40,
            memory_gb=3,
            ok_if_running=True,
        )
    check_clean(
        ctx,
        "--seeds 100000000 --dry-run (60 s)",
        ("run", table, "--seeds", "100000000", "--dry-run", "--out", str(out)),
        timeout=60,
        memory_gb=3,
    )


def case_tune_flags(ctx: Context) -> None:
    """One line, and no study.db for a refused command."""
    table = str(ctx.table_yaml)
    for flag, value in (
        ("--grid", "algorithm.lr=[1"),
        ("--space", "algorithm.lr=log:1e-4:inf"),
        ("--space", "algorithm.lr=uniform:-inf:1"),
        ("--space", "algorithm.lr=uniform:-1:1"),
        ("--grid", "algorithm.lr=0.1,.inf"),
    ):
        where = ctx.folder("bad-tune")
        check_clean(
            ctx,
            f"tune {flag} {value}",
            ("tune", table, flag, value, "--trials", "1", "--out", str(where)),
            absent=(where / "tiny-tune" / "study.db",),
        )


def case_disk_faults(ctx: Context) -> None:
    fb, run_yaml, table = ctx.fb, str(ctx.run_yaml), str(ctx.table_yaml)
    w = ctx.work
    # Read-only --out: new and existing folders.
    for command in ("train", "run", "tune"):
        for existing in (False, True):
            where = ctx.folder(f"ro-{command}")
            target = where / "out"
            if existing:  # a folder with a finished earlier run of another config
                fb("train", run_yaml, "--set", "fl.rounds=1", "--out", str(target))
            args = {
                "train": ("train", run_yaml),
                "run": ("run", table, "--workers", "1"),
                "tune": ("tune", table, "--grid", "algorithm.lr=0.1", "--rounds", "1"),
            }[command]
            fault = {"FEDBENCH_FAULT_DIR": str(where), "FEDBENCH_FAULT_KIND": "rofs"}
            check_clean(
                ctx,
                f"read-only --out, {'existing' if existing else 'new'} folder: {command}",
                (*args, "--out", str(target)),
                fault=fault,
            )

    # Disk full: train with a little space left, then the rerun (space freed) must resume.
    for budget, what in (("0", "no space at all"), ("3000", "3 kB free"), ("40000", "40 kB free")):
        where = ctx.folder("full-train")
        fault = {"FEDBENCH_FAULT_DIR": str(where), "FEDBENCH_FAULT_BYTES": budget}
        check_clean(
            ctx,
            f"disk full during train ({what})",
            ("train", run_yaml, "--out", str(where)),
            out=where,
            fault=fault,
        )
        res = fb("train", run_yaml, "--out", str(where))
        problem = f"exit {res.code}: {res.err.strip()[-200:]}" if res.code else None
        ctx.tally.record(
            "I/O faults",
            f"train resumes after disk full ({what})",
            problem or ctx.matches_reference(where),
        )
    where = ctx.folder("full-ckpt")
    fault = {
        "FEDBENCH_FAULT_DIR": str(where),
        "FEDBENCH_FAULT_BYTES": "100000000",
        "FEDBENCH_FAULT_MATCH": "checkpoint.pt",  # its temporary: .checkpoint.pt.<pid>.<hex>.tmp
    }
    budget_fault = {**fault, "FEDBENCH_FAULT_BYTES": "0"}
    check_clean(
        ctx,
        "disk full at the first checkpoint (train)",
        ("train", run_yaml, "--out", str(where)),
        out=where,
        fault=budget_fault,
    )

    # A sweep with one run hitting a full disk: the others finish and the report is written.
    where = ctx.folder("full-sweep")
    plan = w / "plan.json"
    fb("run", table, "--dry-run", "--write-plan", str(plan), "--out", str(where))
    victim = json.loads(plan.read_text())["runs"][1]["run_id"]
    fault = {
        "FEDBENCH_FAULT_DIR": str(where / "runs" / victim),
        "FEDBENCH_FAULT_BYTES": "0",
        "FEDBENCH_FAULT_MATCH": "checkpoint.pt",
    }
    res = fb("run", table, "--out", str(where), "--workers", "1", fault=fault)
    problems = []
    if "Traceback" in res.err + res.out:
        problems.append("traceback")
    if res.code != 1:
        problems.append(f"exit {res.code} (1: a run failed)")
    if not (where / "tiny" / "summary.csv").is_file():
        problems.append("no report")
    if left := tmp_files(where):
        problems.append(f"left {len(left)} temp file(s): {left[0].name}")
    ctx.tally.record(
        "I/O faults",
        "sweep with one run on a full disk writes its report",
        "; ".join(problems) or None,
    )
    res = fb("run", table, "--out", str(where), "--workers", "1")
    ctx.tally.record(
        "I/O faults",
        "that sweep rerun (space freed) completes",
        None if res.code == 0 else f"exit {res.code}: {res.err.strip()[-200:]}",
    )


# --- payloads ----------------------------------------------------------------------------------


class _Payload:
    """Pickles into a call of os.system (creating the marker file) when unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def case_payloads(ctx: Context) -> None:  # noqa: C901 (one small maker per payload)
    import numpy as np
    import torch

    fb, w = ctx.fb, ctx.work
    count = 0

    def check(case: str, make: Callable[[Path], tuple[str, ...]]) -> None:
        nonlocal count
        count += 1
        marker = w / f"payload-{count}.ran"
        marker.unlink(missing_ok=True)
        args = make(marker)
        res = fb(*args)
        ran = marker.exists()
        ctx.tally.counts.setdefault("payloads executed", [0, 0])
        ctx.tally.counts["payloads executed"][0] += ran
        ctx.tally.counts["payloads executed"][1] += 1
        print(
            f"  {'FAIL' if ran else 'ok  '} payload: {case}: "
            f"{'EXECUTED' if ran else 'not executed'} (exit {res.code})",
            flush=True,
        )
        if ran:
            ctx.tally.failures.append(f"payload executed: {case}")

    tag = "!!python/object/apply:os.system"

    def run_config(marker: Path) -> tuple[str, ...]:
        path = w / "payload-run.yaml"
        path.write_text(f"seed: 0\nname: {tag} ['touch {marker}']\n")
        return ("train", str(path), "--out", str(w / "payload-out"))

    def table_cfg(marker: Path) -> tuple[str, ...]:
        path = w / "payload-table.yaml"
        path.write_text(ctx.table_yaml.read_text() + f"extra: {tag} ['touch {marker}']\n")
        return ("run", str(path), "--dry-run", "--out", str(w / "payload-out"))

    def set_value(marker: Path) -> tuple[str, ...]:
        value = f"seed={tag} ['touch {marker}']"
        return ("train", str(ctx.run_yaml), "--set", value, "--out", str(w / "payload-out"))

    def tuned_file(marker: Path) -> tuple[str, ...]:
        path = w / "payload-tuned.yaml"
        path.write_text(f"table: tiny\nrows: {tag} ['touch {marker}']\n")
        return ("run", str(ctx.table_yaml), "--tuned", str(path), "--dry-run", "--out", str(w))

    def run_folder_config(marker: Path) -> tuple[str, ...]:
        out = w / "payload-folder"
        (out / "runs" / "r1").mkdir(parents=True, exist_ok=True)
        (out / "runs" / "r1" / "config.yaml").write_text(f"seed: {tag} ['touch {marker}']\n")
        (out / "runs" / "r1" / "metrics.jsonl").write_text('{"round": 0, "test_acc": 0.1}\n')
        return ("runs", str(out))

    def checkpoint(marker: Path, checksummed: bool) -> tuple[str, ...]:
        out = w / "payload-ckpt"
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(killed_base, out)
        run = run_dirs(out)[0]
        torch.save({"round": 3, "x": _Payload(marker)}, run / "checkpoint.pt")
        if checksummed:
            checksum(run)
        return ("train", str(ctx.run_yaml), "--out", str(out))

    def npz_arrays(marker: Path) -> tuple[str, ...]:
        path = w / "payload.npz"
        objects = np.empty(2, dtype=object)
        objects[0] = _Payload(marker)
        np.savez(path, x_train=objects, y_train=np.zeros(2), x_test=objects, y_test=np.zeros(2))
        return (
            "train",
            str(ctx.run_yaml),
            "--set",
            "data.name=npz",
            "--set",
            f"data.path={path}",
            "--out",
            str(w / "payload-out"),
        )

    killed_base = killed_run(ctx, "payload-base")
    check("python tag in a run config", run_config)
    check("python tag in a table config", table_cfg)
    check("python tag in a --set value", set_value)
    check("python tag in a tuned.yaml", tuned_file)
    check("python tag in a run folder's config.yaml", run_folder_config)
    check("pickle in checkpoint.pt, checksummed", lambda m: checkpoint(m, True))
    check("pickle in checkpoint.pt, no matching checksum", lambda m: checkpoint(m, False))
    check("pickled object array in an .npz dataset", npz_arrays)


# --- paths -------------------------------------------------------------------------------------


def case_paths(ctx: Context) -> None:
    """Names that point outside --out: nothing may be created outside it."""
    fb = ctx.fb
    sandbox = ctx.folder("sandbox")
    out = sandbox / "a" / "b" / "c" / "d" / "out"
    out.mkdir(parents=True)
    outside = sandbox / "abs-target"
    names = ("../../../../x", "../x", "a/../../y", str(outside / "z"), "sub/dir")

    def escaped() -> list[Path]:
        return [
            p
            for p in sandbox.rglob("*")
            if p.is_file()
            and not p.resolve().is_relative_to(out.resolve())
            and p.name != "table.yaml"
        ]

    def attempt(case: str, args: tuple[str, ...], by_design: bool = False) -> None:
        """`by_design`: the user put the link there; following it is counted apart from the
        escapes (a runs/ folder linked to a bigger disk is a normal set-up)."""
        before = set(escaped())
        fb(*args, timeout=300)
        new = sorted(set(escaped()) - before)
        key = "user links followed" if by_design else "paths escaped"
        ctx.tally.counts.setdefault(key, [0, 0])
        ctx.tally.counts[key][0] += bool(new)
        ctx.tally.counts[key][1] += 1
        verdict = ("followed" if new else "ok      ") if by_design else ("FAIL" if new else "ok  ")
        print(
            f"  {verdict} path: {case}" + (f": wrote {new[0].relative_to(sandbox)}" if new else ""),
            flush=True,
        )
        if new and not by_design:
            ctx.tally.failures.append(f"path escaped: {case}: {new[0]}")
        for path in new:
            path.unlink()

    for i, name in enumerate(names):
        data = table_config(name=name, rounds=1)
        data["seeds"] = [0]
        data["methods"] = {"FedAvg": data["methods"]["FedAvg"]}
        path = write_yaml(sandbox / f"cfg{i}" / "table.yaml", data)
        attempt(f"run, table: {name}", ("run", str(path), "--preset", "quick", "--out", str(out)))
        attempt(f"ablate, table: {name}", ("ablate", str(path), "--out", str(out)))
        attempt(
            f"tune, table: {name}",
            (
                "tune",
                str(path),
                "--preset",
                "quick",
                "--grid",
                "algorithm.lr=0.1",
                "--out",
                str(out),
            ),
        )
    for name in ("../../../../fig", str(outside / "fig"), "a/b"):
        attempt(f"figure {name}", ("figure", name, "--out", str(out)))
    # --out itself holding a runs/ link to a folder outside it: the user's own link, followed by
    # design (not a name fedbench derived), so it is tallied apart from the escapes.
    linked = sandbox / "linked-out"
    linked.mkdir()
    (linked / "runs").symlink_to(outside, target_is_directory=True)
    outside.mkdir(exist_ok=True)
    out_before = out
    out = linked
    attempt(
        "--out whose runs/ links outside",
        ("train", str(ctx.run_yaml), "--out", str(linked)),
        by_design=True,
    )
    out = out_before

    # model.weights misuse: a set field the model cannot use is an error.
    for weights in ("/etc/passwd", str(sandbox / "missing.pt")):
        check_clean(
            ctx,
            f"model.weights={weights} with pretrained on a model without weights",
            (
                "train",
                str(ctx.run_yaml),
                "--set",
                "model.pretrained=true",
                "--set",
                f"model.weights={weights}",
                "--out",
                str(ctx.folder("weights")),
            ),
        )


# --- concurrency -------------------------------------------------------------------------------


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


def case_concurrency(ctx: Context) -> None:
    fb, table = ctx.fb, str(ctx.table_yaml)

    def both(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[Result, Result]:
        ra, rb = at_once(fb, [a, b], timeout=900)
        return ra, rb

    out = ctx.folder("same-sweep")
    args = ("run", table, "--out", str(out), "--workers", "1")
    ra, rb = both(args, args)
    attempts = [json.loads((d / "attempt.json").read_text())["attempts"] for d in run_dirs(out)]
    problem = None
    if ra.code or rb.code:
        problem = f"exit codes {ra.code}, {rb.code}"
    elif attempts != [1] * 4:
        problem = f"attempts per run {attempts}"
    ctx.tally.record(
        "concurrency", "two identical sweeps into one --out train each run once", problem
    )

    out = ctx.folder("two-sweeps")
    a = ("run", table, "--out", str(out), "--seeds", "0,1", "--workers", "1")
    b = ("run", table, "--out", str(out), "--seeds", "1,", "--workers", "1")
    ra, rb = both(a, b)
    problems = []
    for res, seeds in ((ra, {0, 1}), (rb, {1})):
        lines = [x for x in res.out.splitlines() if x.startswith("report: ")]
        if res.code or not lines:
            problems.append(f"exit {res.code}: {res.err.strip()[-150:]}")
            continue
        folder = Path(lines[-1].removeprefix("report: ").strip())
        plan = json.loads((folder / "plan.json").read_text())
        got = {r["seed"] for r in plan["runs"]}
        if got != seeds:
            problems.append(
                f"seeds {sorted(seeds)} printed {folder.name}, which reports {sorted(got)}"
            )
    ctx.tally.record(
        "concurrency",
        "two different sweeps sharing runs: each points at its own report",
        "; ".join(problems) or None,
    )


# --- reliability (issue 35): data loss, files read back, names, interrupts, the study, bombs --


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


def _driver(ctx: Context, code: str, args: list[str]) -> subprocess.CompletedProcess:
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


KILL_IN_MODEL_PT = """
import io, os, signal, torch
_real = torch.save
def _save(obj, f, *a, **k):
    name = str(getattr(f, "name", f))
    if "model.pt" in name:
        buf = io.BytesIO(); _real(obj, buf, *a, **k); data = buf.getvalue()
        if hasattr(f, "write"):
            f.write(data[: len(data) // 2]); f.flush()
        else:
            open(f, "wb").write(data[: len(data) // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    return _real(obj, f, *a, **k)
torch.save = _save
"""


def case_data_loss(ctx: Context) -> None:  # noqa: C901 (one block per way to lose data)
    fb, run_yaml, table = ctx.fb, str(ctx.run_yaml), str(ctx.table_yaml)
    cat = "data loss"

    # model.pt: killed while written, then rerun with --save-model.
    out = ctx.folder("model-kill")
    _driver(ctx, KILL_IN_MODEL_PT, ["train", run_yaml, "--out", str(out), "--save-model"])
    res = fb("train", run_yaml, "--out", str(out), "--save-model")
    runs = run_dirs(out)
    problem = settled(res)
    if problem is None and not (runs and readable_model(runs[0] / "model.pt")):
        problem = "LOST: model.pt unreadable after the rerun"
    ctx.tally.record(cat, "train --save-model killed while writing model.pt, rerun", problem)

    # model.pt on a full disk, then the rerun with space.
    out = ctx.folder("model-full")
    fault = {"FEDBENCH_FAULT_DIR": str(out), "FEDBENCH_FAULT_MATCH": "model.pt"}
    first = fb("train", run_yaml, "--out", str(out), "--save-model", fault=fault)
    res = fb("train", run_yaml, "--out", str(out), "--save-model")
    runs = run_dirs(out)
    problem = one_clean_line(first) or settled(res)
    if problem is None and not (runs and readable_model(runs[0] / "model.pt")):
        problem = "LOST: model.pt unreadable after the rerun"
    ctx.tally.record(cat, "disk full while writing model.pt, rerun with space", problem)

    # A complete report, then `report` on a full disk: the previous report must survive.
    out = ctx.folder("report-full")
    fb("run", table, "--out", str(out), "--preset", "quick", "--workers", "1")
    folder = out / "tiny-quick"
    before = report_bytes(folder)
    for budget in ("0", "300"):
        fault = {"FEDBENCH_FAULT_DIR": str(folder), "FEDBENCH_FAULT_BYTES": budget}
        res = fb("report", str(folder), fault=fault)
        problem = settled(res)
        if report_bytes(folder) != before:
            problem = "LOST: the previous report was changed or destroyed"
        elif problem is None and (left := tmp_files(folder)):
            problem = f"left {left[0].name}"
        ctx.tally.record(cat, f"report on a disk with {budget} bytes free", problem)

    # tuned.yaml rewritten on a full disk.
    out = ctx.folder("tuned-full")
    tune_args = ("tune", table, "--grid", "algorithm.lr=0.1", "--rounds", "1", "--out", str(out))
    fb(*tune_args)
    tuned = out / "tiny-tune" / "tuned.yaml"
    if tuned.is_file():
        before_tuned = tuned.read_bytes()
        fault = {"FEDBENCH_FAULT_DIR": str(out / "tiny-tune"), "FEDBENCH_FAULT_MATCH": "tuned.yaml"}
        res = fb(*tune_args, fault=fault)
        problem = settled(res)
        if tuned.read_bytes() != before_tuned:
            problem = "LOST: tuned.yaml was changed or destroyed"
    else:
        problem = "the first tune wrote no tuned.yaml"
    ctx.tally.record(cat, "tune rewriting tuned.yaml on a full disk", problem)

    # Two tables whose names are one folder once sanitised, into one --out.
    out = ctx.folder("alpha-beta")
    folders = []
    for name in ("α", "β"):
        data = table_config(name=name, rounds=1)
        data["seeds"] = [0]
        path = write_yaml(ctx.work / f"table-{name}.yaml", data)
        res = fb("run", str(path), "--out", str(out), "--workers", "1")
        lines = [x for x in res.out.splitlines() if x.startswith("report: ")]
        folders.append((name, res, Path(lines[-1][8:].strip()) if lines else None))
    problem = None
    for name, res, folder in folders:
        problem = problem or settled(res)
        if problem is None and folder is not None:
            plan = json.loads((folder / "plan.json").read_text())
            if plan["table"]["table"] != name:
                problem = f"LOST: {name}'s report folder holds table {plan['table']['table']}"
    if problem is None and folders[0][2] == folders[1][2]:
        problem = "LOST: two tables reported into one folder"
    ctx.tally.record(cat, "tables α and β into one --out", problem)

    # A sweep under a non-UTF-8 locale writes every report file.
    out = ctx.folder("c-locale")
    res = fb(
        "run",
        table,
        "--out",
        str(out),
        "--preset",
        "quick",
        "--workers",
        "1",
        extra_env={"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""},
    )
    problem = settled(res)
    missing = [n for n in (*REPORT_FILES, "curves.png") if not (out / "tiny-quick" / n).is_file()]
    if problem is None and missing:
        problem = f"LOST: no {', '.join(missing)}"
    ctx.tally.record(cat, "a sweep under LC_ALL=C PYTHONUTF8=0", problem)


def case_read_back(ctx: Context) -> None:  # noqa: C901 (one maker per damaged file)
    fb, run_yaml, table = ctx.fb, str(ctx.run_yaml), str(ctx.table_yaml)
    cat = "files read back"
    done = ctx.folder("finished-base")
    fb("train", run_yaml, "--out", str(done))
    killed = killed_run(ctx, "read-back-killed")

    def text(name: str, content: str | bytes) -> Callable[[Path], None]:
        def damage(run: Path) -> None:
            data = content.encode() if isinstance(content, str) else content
            (run / name).write_bytes(data)

        return damage

    def folder_instead(name: str) -> Callable[[Path], None]:
        def damage(run: Path) -> None:
            (run / name).unlink(missing_ok=True)
            (run / name).mkdir()

        return damage

    def metrics_row(row: str) -> Callable[[Path], None]:
        def damage(run: Path) -> None:
            lines = (run / "metrics.jsonl").read_text().splitlines()
            lines[1] = row
            (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")

        return damage

    damages: dict[str, Callable[[Path], None]] = {
        "summary.json holding a list": text("summary.json", "[1, 2]"),
        "summary.json holding a string": text("summary.json", '"completed"'),
        "summary.json invalid UTF-8": text("summary.json", b'{"status": "\xff\xfe"}'),
        'summary.json with final: "oops"': text(
            "summary.json", '{"status": "completed", "final": "oops"}'
        ),
        "metrics.jsonl row without round": metrics_row('{"test_acc": 0.5}'),
        'metrics.jsonl row with test_acc: "abc"': metrics_row('{"round": 1, "test_acc": "abc"}'),
        'attempt.json with attempts: "x"': text("attempt.json", '{"attempts": "x"}'),
        "attempt.json invalid UTF-8": text("attempt.json", b"\xff\xfe{"),
        "metrics.jsonl a folder": folder_instead("metrics.jsonl"),
    }
    for case, damage in damages.items():
        for base, state in ((done, "finished"), (killed, "killed")):
            out = ctx.work / "read-back"
            shutil.rmtree(out, ignore_errors=True)
            shutil.copytree(base, out)
            damage(run_dirs(out)[0])
            for args in (("train", run_yaml), ("runs",)):
                res = fb(*args, str(out)) if args == ("runs",) else fb(*args, "--out", str(out))
                problem = settled(res)
                skipped = state == "finished" and "already done" in res.out
                if problem is None and args[0] == "train" and res.code == 0 and not skipped:
                    problem = ctx.matches_reference(out)  # retrained or resumed: same result
                ctx.tally.record(cat, f"{case} ({state} run): {args[0]}", problem)

    # checkpoint.pt a folder (killed run): the rerun recovers.
    out = ctx.work / "read-back"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(killed, out)
    folder_instead("checkpoint.pt")(run_dirs(out)[0])
    res = fb("train", run_yaml, "--out", str(out))
    problem = settled(res) or (ctx.matches_reference(out) if res.code == 0 else None)
    ctx.tally.record(cat, "checkpoint.pt a folder: train", problem)

    # runs/<id> a regular file; OUT/runs a regular file.
    rid = run_dirs(done)[0].name

    def run_file(o: Path) -> None:
        (o / "runs").mkdir()
        (o / "runs" / rid).touch()

    for case, make in (
        ("runs/<id> a regular file", run_file),
        ("OUT/runs a regular file", lambda o: (o / "runs").touch()),
    ):
        out = ctx.folder("read-back-files")
        make(out)
        ctx.tally.record(cat, f"{case}: train", settled(fb("train", run_yaml, "--out", str(out))))

    # A report over damaged run files and plans.
    rep = ctx.folder("read-back-report")
    fb("run", table, "--out", str(rep), "--preset", "quick", "--workers", "1")
    folder = rep / "tiny-quick"
    plan_text = (folder / "plan.json").read_text()
    first = run_dirs(rep)[0]
    summary_text = (first / "summary.json").read_text()
    metrics_text = (first / "metrics.jsonl").read_text()
    for case, (path, content) in {
        "plan.json not JSON": (folder / "plan.json", "{not json"),
        "plan.json without runs": (folder / "plan.json", '{"table": {}}'),
        "summary.json holding a list": (first / "summary.json", "[1]"),
        'summary.json with final: "oops"': (
            first / "summary.json",
            '{"status": "completed", "final": "oops"}',
        ),
        'metrics.jsonl row with test_acc: "abc"': (
            first / "metrics.jsonl",
            '{"round": 0, "test_acc": "abc"}\n' + metrics_text,
        ),
    }.items():
        path.write_text(content)
        ctx.tally.record(cat, f"report: {case}", settled(fb("report", str(folder))))
        (folder / "plan.json").write_text(plan_text)
        (first / "summary.json").write_text(summary_text)
        (first / "metrics.jsonl").write_text(metrics_text)

    # tuned.yaml: malformed rows, values and cells, a column the table lacks.
    for case, rows in {
        "a row that is a list": {"FedAvg": [1, 2]},
        "values that are a list": {"FedAvg": {"partition.alpha=0.6": {"values": [1]}}},
        "a cell that is a string": {"FedAvg": {"partition.alpha=0.6": "fast"}},
        "a column the table lacks": {
            "FedAvg": {"partition.alpha=0.3": {"values": {"algorithm.lr": 0.5}}}
        },
    }.items():
        path = write_yaml(ctx.work / "tuned.yaml", {"table": "tiny", "rows": rows})
        out = ctx.folder("read-back-tuned")
        res = fb("run", table, "--tuned", str(path), "--dry-run", "--out", str(out))
        ctx.tally.record(cat, f"tuned.yaml with {case}", one_clean_line(res))

    # study.db overwritten with garbage, or a folder.
    for case, make in (
        ("garbage", lambda p: p.write_bytes(b"not a database" * 100)),
        ("a folder", lambda p: p.mkdir()),
    ):
        out = ctx.folder("read-back-study")
        (out / "tiny-tune").mkdir()
        make(out / "tiny-tune" / "study.db")
        res = fb("tune", table, "--grid", "algorithm.lr=0.1", "--rounds", "1", "--out", str(out))
        ctx.tally.record(cat, f"study.db {case}: tune", one_clean_line(res))


def case_names(ctx: Context) -> None:
    fb, run_yaml, table = ctx.fb, str(ctx.run_yaml), str(ctx.table_yaml)
    cat = "names and paths"
    data = table_config(name="t" * 300, rounds=1)
    data["seeds"] = [0]
    data["methods"] = {"FedAvg": data["methods"]["FedAvg"]}
    long_table = write_yaml(ctx.work / "long-table.yaml", data)
    out = ctx.folder("long-name")
    ctx.tally.record(
        cat,
        "a 300-character table name: run",
        settled(fb("run", str(long_table), "--out", str(out))),
    )
    out = ctx.folder("long-set")
    res = fb(
        "train",
        run_yaml,
        "--set",
        "data.name=npz",
        "--set",
        "data.path=" + "p" * 120_000,
        "--out",
        str(out),
    )
    ctx.tally.record(cat, "a 120 kB --set value: train", settled(res))

    a_file = ctx.work / "a-file"
    a_file.write_text("not a folder\n")
    for target, what in ((a_file, "an existing file"), (a_file / "sub", "below a file")):
        for args in (
            ("train", run_yaml),
            ("run", table, "--preset", "quick"),
            ("figure", "fedadamom-escape", "--preset", "quick"),
        ):
            res = fb(*args, "--out", str(target))
            ctx.tally.record(cat, f"--out {what}: {args[0]}", one_clean_line(res))
    plan_dir = ctx.folder("plan-dir")
    res = fb("run", table, "--dry-run", "--write-plan", str(plan_dir), "--out", str(plan_dir))
    ctx.tally.record(cat, "--write-plan naming a folder", one_clean_line(res))
    ro = ctx.folder("plan-ro")
    fault = {"FEDBENCH_FAULT_DIR": str(ro), "FEDBENCH_FAULT_KIND": "rofs"}
    res = fb("run", table, "--dry-run", "--write-plan", str(ro / "p.json"), fault=fault)
    ctx.tally.record(cat, "--write-plan on a read-only folder", one_clean_line(res))

    colon = ctx.folder("co:lon")
    fb("run", table, "--out", str(colon), "--preset", "quick", "--workers", "1")
    side = f"{colon / 'tiny-quick'}"
    res = fb("compare", f"{side}:FedAvg", f"{side}:FedAdamW")
    problem = settled(res)
    if problem is None and "not a table folder" in res.err:
        problem = "split FOLDER:ROW at the wrong ':'"
    ctx.tally.record(cat, "compare FOLDER:ROW with a ':' in FOLDER", problem)


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
    got = _driver(ctx, INTERRUPT_IN_CHECKPOINT, ["train", run_yaml, "--out", str(out)])
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


def case_study(ctx: Context) -> None:
    fb, table = ctx.fb, str(ctx.table_yaml)
    cat = "tune store"
    for i in range(3):  # two tunes of one new study at once
        out = ctx.folder("two-tunes")
        args = ("tune", table, "--grid", "algorithm.lr=0.1", "--rounds", "1", "--out", str(out))
        results = at_once(fb, [args, args], timeout=600)
        problem = next((settled(r) for r in results if settled(r) is not None), None)
        ctx.tally.record(cat, f"two tunes of one new study at once ({i + 1})", problem)
    for kb in (64, 200):
        out = ctx.folder("tune-fsize")
        res = fb(
            "tune",
            table,
            "--grid",
            "algorithm.lr=0.1,0.05",
            "--rounds",
            "1",
            "--out",
            str(out),
            file_kb=kb,
        )
        ctx.tally.record(cat, f"tune with files limited to {kb} kB (a disk filling)", settled(res))
    grid = [f"--grid=algorithm.{k}=" + ",".join(str(i + 1) for i in range(100)) for k in ("lr",)]
    grid += [
        f"--grid=fl.{k}=" + ",".join(str(i + 1) for i in range(100))
        for k in ("local_steps", "batch_size", "rounds")
    ]
    out = ctx.folder("tune-grid")
    res = fb("tune", table, *grid, "--out", str(out), timeout=60)
    ctx.tally.record(cat, "a --grid of 4 fields x 100 values (60 s)", one_clean_line(res))
    res = fb(
        "tune",
        table,
        "--space",
        "algorithm.lr=log:1e-4:1",
        "--trials",
        "1000000000",
        "--out",
        str(out),
        timeout=60,
    )
    ctx.tally.record(cat, "--trials 10**9 (60 s)", one_clean_line(res))


def case_bombs(ctx: Context) -> None:
    import numpy as np

    run_yaml = str(ctx.run_yaml)
    cat = "bombs"
    arrays = {
        "a label of 10**9": (np.zeros((8, 4), np.float32), np.array([0, 1] * 3 + [1, 10**9])),
        "no training samples": (np.zeros((0, 4), np.float32), np.zeros(0, np.int64)),
    }
    for case, (x, y) in arrays.items():
        path = ctx.work / "bomb.npz"
        np.savez(path, x_train=x, y_train=y, x_test=np.zeros((2, 4), np.float32), y_test=[0, 1])
        out = ctx.folder("bomb")
        sets = ("--set", "data.name=npz", "--set", f"data.path={path}")
        res = ctx.fb("train", run_yaml, *sets, "--out", str(out), memory_gb=3, timeout=60)
        ctx.tally.record(cat, f"npz with {case} (3 GB)", one_clean_line(res))
    for sets in (
        ("data.image_size=100000",),
        ("partition.kind=dirichlet_equal", "partition.samples_per_client=1000000000"),
    ):
        out = ctx.folder("bomb")
        args = [a for s in sets for a in ("--set", s)]
        res = ctx.fb("train", run_yaml, *args, "--out", str(out), memory_gb=3, timeout=60)
        ctx.tally.record(cat, f"--set {' '.join(sets)} (3 GB, 60 s)", one_clean_line(res))
    out = ctx.folder("bomb")
    res = ctx.fb(
        "figure",
        "fedadamom-escape",
        "--set",
        "trials=1000000000",
        "--out",
        str(out),
        memory_gb=3,
        timeout=60,
    )
    ctx.tally.record(
        cat, "figure fedadamom-escape --set trials=10**9 (3 GB, 60 s)", one_clean_line(res)
    )


API_CALLS = {
    "train(None, out)": "fedbench.train(None, OUT)",
    "train(cfg, out=None)": "fedbench.train(fedbench.load_config(), out=None)",
    "run_table(..., seeds='2')": "fedbench.run_table('table1', seeds='2', out=OUT)",
    "load_config(overrides='fl.rounds=3')": "fedbench.load_config(overrides='fl.rounds=3')",
    "run_table(..., methods='FedAvg')": "fedbench.run_table('table1', methods='FedAvg', out=OUT)",
    "make_report(3)": "fedbench.make_report(3)",
    "load_config(path=5)": "fedbench.load_config(5)",
}


def case_api(ctx: Context) -> None:
    """Wrong types through the Python API: a FedbenchError, or a TypeError naming the argument."""
    out = ctx.folder("api")
    script = textwrap.dedent(
        f"""
        import json, fedbench
        OUT = {str(out)!r}
        found = {{}}
        for case, call in {API_CALLS!r}.items():
            try:
                eval(call)
                found[case] = "no error"
            except fedbench.FedbenchError as exc:
                found[case] = "ok"
            except TypeError as exc:
                arg = call.split("(", 1)[1]
                named = any(w in str(exc) for w in ("out", "seeds", "overrides", "methods",
                                                     "config", "folder", "path"))
                found[case] = "ok" if named else f"TypeError: {{exc}}"
            except Exception as exc:
                found[case] = f"{{type(exc).__name__}}: {{exc}}"
        print(json.dumps(found))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], env=ctx.fb.env(), capture_output=True, text=True
    )
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        found = {case: f"the script failed: {proc.stderr[-200:]}" for case in API_CALLS}
    for case, verdict in found.items():
        ctx.tally.record("api types", case, None if verdict == "ok" else verdict[:200])


def case_litter(ctx: Context) -> None:
    fb, run_yaml, table = ctx.fb, str(ctx.run_yaml), str(ctx.table_yaml)
    cat = "litter"
    killed = killed_run(ctx, "litter-killed")
    out = ctx.work / "litter"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(killed, out)
    run = run_dirs(out)[0]
    for name in ("checkpoint.json", "summary.json", "config.yaml"):
        (run / f".{name}.4194999.deadbeef.tmp").write_text("half")
    res = fb("train", run_yaml, "--out", str(out))
    problem = settled(res) or (f"left {tmp_files(out)[0].name}" if tmp_files(out) else None)
    ctx.tally.record(cat, "stale temporaries in a killed run's folder, rerun", problem)

    done = ctx.folder("litter-done")
    fb("train", run_yaml, "--out", str(done))
    run = run_dirs(done)[0]
    shutil.copy(run_dirs(killed)[0] / "checkpoint.pt", run / "checkpoint.pt")
    res = fb("train", run_yaml, "--out", str(done))
    problem = settled(res) or ("checkpoint.pt kept" if (run / "checkpoint.pt").exists() else None)
    ctx.tally.record(cat, "a finished run holding checkpoint.pt (killed before cleanup)", problem)

    rep = ctx.folder("litter-report")
    fb("run", table, "--out", str(rep), "--preset", "quick", "--workers", "1")
    (rep / "tiny-quick" / ".plan.json.4194999.deadbeef.tmp").write_text("half")
    res = fb("run", table, "--out", str(rep), "--preset", "quick", "--workers", "1")
    problem = settled(res) or (f"left {tmp_files(rep)[0].name}" if tmp_files(rep) else None)
    ctx.tally.record(cat, "a stale .plan.json temporary, rerun", problem)

    foreign = ctx.folder("litter-foreign")
    fb("train", run_yaml, "--out", str(foreign))
    (foreign / "runs" / "foreign").mkdir()
    (foreign / "runs" / "foreign" / "config.yaml").write_text("- a list\n")
    res = fb("runs", str(foreign))
    ctx.tally.record(cat, "a foreign runs/ folder whose config is a list: runs", settled(res))

    where = ctx.folder("litter-enospc")
    fault = {"FEDBENCH_FAULT_DIR": str(where), "FEDBENCH_FAULT_BYTES": "3000"}
    res = fb("train", run_yaml, "--out", str(where), fault=fault)
    problem = one_clean_line(res)
    if problem is None and ": a file;" in res.err:
        problem = "the ENOSPC line names no path"
    ctx.tally.record(cat, "an ENOSPC line names the path", problem)


# --- main --------------------------------------------------------------------------------------

CASES = {
    "kills": case_kills,
    "corruptions": case_corruptions,
    "inputs": case_bad_inputs,
    "numbers": case_numbers,
    "tune": case_tune_flags,
    "disk": case_disk_faults,
    "payloads": case_payloads,
    "paths": case_paths,
    "concurrency": case_concurrency,
    "dataloss": case_data_loss,
    "readback": case_read_back,
    "names": case_names,
    "interrupts": case_interrupts,
    "study": case_study,
    "bombs": case_bombs,
    "api": case_api,
    "litter": case_litter,
}


def failure_kinds(failures: list[str]) -> dict[str, int]:
    """Failures by kind: tracebacks, data lost ("LOST"), hangs ("timed out"), other."""
    kinds = {"traceback": 0, "lost": 0, "hang": 0, "other": 0}
    for failure in failures:
        if "LOST" in failure:
            kinds["lost"] += 1
        elif "traceback" in failure.lower():
            kinds["traceback"] += 1
        elif "timed out" in failure:
            kinds["hang"] += 1
        else:
            kinds["other"] += 1
    return kinds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help=f"comma-separated subset of {', '.join(CASES)}")
    parser.add_argument("--kills", type=int, default=4, help="SIGKILLs of a sweep (default 4)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the fedbench checkout to test")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = parser.parse_args()
    chosen = args.only.split(",") if args.only else list(CASES)
    work = Path(tempfile.mkdtemp(prefix="fedbench-faults-"))
    ctx = Context(args.root.resolve(), work, args.kills)
    # Started in the background by a shell, this process (and so every fedbench it starts)
    # would ignore SIGINT: the Ctrl-C cases need Python's own handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # `python -m fedbench` and `python -c` put the working folder first on sys.path: from a
    # checkout, that would test its fedbench instead of --root's.
    os.chdir(work)
    t0 = time.perf_counter()
    try:
        for name in chosen:
            print(f"{name}:", flush=True)
            CASES[name](ctx)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")
    counts = ctx.tally.counts
    labels = {
        "kills": "kills survived",
        "corruptions": "corruptions recovered",
        "bad inputs": "bad inputs giving one clean line",
        "I/O faults": "I/O faults leaving a resumable run and a report",
        "concurrency": "concurrent sweeps kept apart",
        "payloads executed": "payloads executed",
        "paths escaped": "paths escaped",
        "user links followed": "runs/ links placed by the user and followed (by design)",
        "data loss": "writes that kept every complete file (model.pt, reports, tuned.yaml)",
        "files read back": "damaged files read back: recovered or one clean line",
        "names and paths": "hostile names and paths: handled or one clean line",
        "interrupts": "Ctrl-C: exit 130 and one resume line (or finished)",
        "tune store": "study store faults and tune bounds: one clean line",
        "bombs": "resource bombs and degenerate data refused in one line",
        "api types": "Python API wrong types: FedbenchError or a TypeError naming it",
        "litter": "litter cleaned and smaller faults",
    }
    print(f"\nsummary ({time.perf_counter() - t0:.0f} s):")
    for key, label in labels.items():
        if key in counts:
            held, tried = counts[key]
            print(f"  {label}: {held} of {tried}")
    kinds = failure_kinds(ctx.tally.failures)
    print(
        f"  failures: {kinds['traceback']} tracebacks, {kinds['lost']} data lost, "
        f"{kinds['hang']} hangs, {kinds['other']} other"
    )
    bad = [k for k in ("payloads executed", "paths escaped") if counts.get(k, [0])[0]]
    return 1 if ctx.tally.failures or bad else 0


if __name__ == "__main__":
    sys.exit(main())
