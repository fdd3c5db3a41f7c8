"""A run folder `DIR/runs/<run_id>/` (docs/runs.md, "The run folder"): config.yaml, metrics.jsonl,
summary.json, partition.json, checkpoint.pt (+ checkpoint.json, its checksum) while running,
model.pt with --save-model, and the two files that make a folder safe to share between processes
and readable while it runs: `lock` (an advisory file lock held by the process training the run)
and `attempt.json` (who started the latest attempt, and how many there have been).

`run_status(folder)` reads all of it into one of finished / running / failed / pending
(docs/sweeps.md, "Run status"); it needs nothing but the folder, so `fedbench runs` or a plain
script can call it on a sweep that is still going.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from fedbench.config import RunConfig
from fedbench.engine.loggers import MetricLogger
from fedbench.errors import FedbenchError
from fedbench.files import remove_stale_temporaries, safe_name, write_file, write_json
from fedbench.metrics_log import read_rows, truncate
from fedbench.readback import Attempt, BadFile, Summary, read_json_dict, read_text, set_aside
from fedbench.yaml_safe import MAX_YAML_BYTES, load_yaml

#: Final statuses: a run with one of these is not run again. `stopped`: ended early on request
#: (a STOP file, e.g. a pruned tuning trial) after an evaluation.
FINAL_STATUSES = ("completed", "diverged", "stopped")

#: What `run_status` reports, grouped as `fedbench runs` shows them.
STATUS_GROUPS = {
    "completed": "finished",
    "diverged": "finished",
    "stopped": "finished",
    "running": "running",
    "failed": "failed",
    "interrupted": "pending",  # started, not running now: the next sweep resumes it
    "pending": "pending",  # never started
}

#: How long a run waits for a lock that a status reader holds for an instant (see `run_lock`).
_READER_GRACE_S = 1.0


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON atomically (fedbench.files.write_json): readers see the old file or the new
    one, and a failed write leaves no temporary behind."""
    write_json(path, data)


def child_folder(root: Path, label: str) -> Path:
    """root/<safe_name(label)>, checked to resolve inside root (symlinks included).

    The one way from a name (a table, preset, figure, run id, ...) to a path that fedbench
    writes: nothing named by a config or on the command line can lead outside --out."""
    path = root / safe_name(label)
    if not path.resolve().is_relative_to(root.resolve()):
        raise FedbenchError(
            f"{path} is a link that resolves outside {root}; remove it (fedbench writes only "
            f"inside {root})"
        )
    return path


def _adopt(old: Path, path: Path) -> None:
    """Rename the run folder `old` to `path` and leave `old` as a relative link to it."""
    if not old.is_dir() or old.is_symlink():
        return
    try:
        os.rename(old, path)
    except FileNotFoundError:  # another process moved it first: it is at `path` now
        return
    # No links here (or another process made it first): the run itself has moved all the same.
    with contextlib.suppress(OSError):
        os.symlink(path.name, old)


def utc_text(timestamp: float) -> str:
    """A POSIX time as '2026-11-23 21:30:12 UTC'."""
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(timestamp))


class RunBusyError(Exception):
    """Another process holds the run folder's lock (it is training this run now)."""


class RunFolder:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.config = path / "config.yaml"
        self.metrics = path / "metrics.jsonl"
        self.summary = path / "summary.json"
        self.partition = path / "partition.json"
        self.checkpoint = path / "checkpoint.pt"
        self.model = path / "model.pt"
        #: Experiment trackers (runtime.loggers) that receive every appended metrics row.
        self.loggers: list[MetricLogger] = []
        self.lock_file = path / "lock"
        self.attempt = path / "attempt.json"
        self.stop = path / "STOP"

    @classmethod
    def for_config(cls, out: Path, cfg: RunConfig) -> RunFolder:
        """out/runs/<run_id>. A run filed under the id the config had before (a shards run whose
        id named the unused partition.alpha: RunConfig.run_id(legacy=True)) moves to its
        current id, and its old name stays behind as a link to it, so that neither is orphaned:
        a sweep finds it finished (or resumes it), and the old id still opens it."""
        path = child_folder(out / "runs", cfg.run_id())
        legacy = cfg.run_id(legacy=True)
        if legacy != path.name and not path.exists():
            _adopt(child_folder(out / "runs", legacy), path)
        return cls(path)

    def read_summary(self) -> dict[str, Any] | None:
        """summary.json, validated (fedbench.readback.Summary); None when there is none.
        A bad one (not JSON, not a summary) raises BadFile."""
        try:
            return read_json_dict(self.summary, Summary, fix=self.retrain_hint)
        except FileNotFoundError:
            return None

    @property
    def retrain_hint(self) -> str:
        return f"rerun the command that trained it to train it again, or remove {self.path}"

    def is_finished(self) -> bool:
        """Whether the run has a final summary and a metrics.jsonl that reads back. A bad one
        is not finished: the run is trained again, and the file is set aside by
        `set_aside_bad_files` when it starts."""
        try:
            summary = self.read_summary()
            if summary is None or summary.get("status") not in FINAL_STATUSES:
                return False
            read_rows(self.metrics, strict=True)
        except BadFile:
            return False
        return True

    def set_aside_bad_files(self) -> None:
        """Before an attempt (holding the lock): run files that do not read back are moved to
        `<name>.corrupt` with a warning, and stale temporaries of killed writers removed; the
        run is then trained again from what is left (its checkpoint, if that one is sound)."""
        remove_stale_temporaries(self.path)
        # The checkpoint's temporary as earlier versions named it (one per folder).
        (self.path / "checkpoint.pt.tmp").unlink(missing_ok=True)
        for path, schema in ((self.summary, Summary), (self.attempt, Attempt)):
            try:
                read_json_dict(path, schema, fix="")
            except FileNotFoundError:
                continue
            except BadFile as problem:
                set_aside(path, problem, "training the run again")
        for path in (self.metrics, self.checkpoint):
            if path.is_dir():
                set_aside(path, BadFile(path, "is a folder, not a file", ""), "training again")
        try:
            read_rows(self.metrics, strict=True)
        except BadFile as problem:  # a bad row before the end: not a torn line of a kill
            set_aside(self.metrics, problem, "training the run again")

    def create(self, cfg: RunConfig, data_source: str | None = None) -> None:
        """config.yaml: the resolved run config (loadable by `fedbench train`), headed by a
        comment that records where the data was read from (data.root/path may be unset)."""
        self.path.mkdir(parents=True, exist_ok=True)
        header = f"# data read from: {data_source}\n" if data_source else ""
        write_file(self.config, header + yaml.safe_dump(cfg.to_dict(), sort_keys=False))

    def data_source(self) -> str | None:
        """The data location recorded in config.yaml's header (None if absent)."""
        if not self.config.is_file():
            return None
        try:
            first = read_text(self.config, fix="").split("\n", 1)[0]
        except BadFile:
            return None
        prefix = "# data read from: "
        return first[len(prefix) :] if first.startswith(prefix) else None

    def read_metrics(self) -> list[dict[str, Any]]:
        """The complete rows of metrics.jsonl (a torn last line, left by a process that died
        mid-write, is not one: fedbench.metrics_log)."""
        return read_rows(self.metrics)

    def truncate_metrics(self, lines: int) -> None:
        """Keep the first `lines` rows (those the checkpoint knows about), and drop a torn line."""
        if self.metrics.is_file():
            truncate(self.metrics, lines)

    def append_metrics(self, row: dict[str, Any]) -> None:
        try:
            with open(self.metrics, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:
            if exc.filename is None:  # a failed write(2) names no file; the error line should
                exc.filename = str(self.metrics)
            raise
        for logger in self.loggers:
            logger.log(row)

    def request_stop(self, reason: str) -> None:
        """Ask the run training in this folder to end after its next evaluation (status
        `stopped`); any process that sees the folder can ask, e.g. a tuner pruning a trial."""
        self.path.mkdir(parents=True, exist_ok=True)
        write_file(self.stop, reason + "\n")

    def stop_requested(self) -> str | None:
        """The reason of a pending stop request, or None."""
        if not self.stop.is_file():
            return None
        try:
            return read_text(self.stop, fix="").strip() or "stop requested"
        except (BadFile, FileNotFoundError):
            return "stop requested"

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_json_atomic(self.summary, summary)

    def checkpoint_round(self) -> int | None:
        """The round the checkpoint holds (None without one)."""
        import torch

        if not self.checkpoint.is_file():
            return None
        try:
            state = torch.load(self.checkpoint, map_location="cpu", weights_only=True)
            return int(state["round"])
        except Exception:  # a malformed checkpoint: the rerun sets it aside and restarts
            return None

    def checkpoint_written(self) -> tuple[int, str] | None:
        """(round, when it was written) of the checkpoint, from its checksum file (cheap: the
        checkpoint itself is not read); None without a checkpoint or a readable checksum file.
        The time is the one recorded at writing, else the file's modification time, in UTC."""
        from fedbench.readback import Checksum

        meta_path = self.checkpoint.with_suffix(".json")
        try:
            meta = read_json_dict(meta_path, Checksum, fix="")
            mtime = self.checkpoint.stat().st_mtime
        except (OSError, BadFile):
            return None
        if meta.get("round") is None:
            return None
        written = meta.get("written") or utc_text(mtime)
        return meta["round"], str(written)

    def resuming_line(self) -> str | None:
        """'resuming RUN from round N (checkpoint of TIME)', or None without a checkpoint."""
        found = self.checkpoint_written()
        if found is None:
            return None
        return f"resuming {self.path.name} from round {found[0]} (checkpoint of {found[1]})"

    def interrupted_line(self, rounds: int, resume: str) -> str:
        """One line after Ctrl-C: the run, the round its checkpoint holds, the resume command."""
        evaluated = self.read_metrics()
        last = (
            f"last evaluated round {evaluated[-1]['round']}/{rounds}" if evaluated else "no round"
        )
        at = self.checkpoint_round()
        where = (
            f"checkpoint at round {at}: {self.checkpoint}"
            if at is not None
            else "no checkpoint yet (runtime.checkpoint_every), the rerun starts at round 0"
        )
        return f"interrupted run {self.path.name} ({last}); {where}; resume: {resume}"

    # --- sharing the folder between processes ---------------------------------------------------
    @contextmanager
    def lock(self, *, wait: bool = True) -> Iterator[None]:
        """Hold the run's lock: while held, no other process trains this run.

        An flock(2) on `lock`, so the kernel releases it when the holder dies, SIGKILL included:
        there are no stale locks to clean up (on NFS, Linux maps flock to NFS byte-range locks,
        which the server drops when the client's lease expires). With `wait=False` a lock held by
        another run raises RunBusyError; status readers take it for an instant, so a short grace
        period tells them apart. The lock file is never deleted: unlinking a lock file that another
        process is waiting on would let two processes hold "the" lock at once.
        """
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if wait:
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                deadline = time.monotonic() + _READER_GRACE_S
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        if time.monotonic() > deadline:
                            raise RunBusyError(str(self.path)) from None
                        time.sleep(0.05)
            yield
        finally:
            os.close(fd)  # releases the lock

    def is_locked(self) -> bool:
        """Whether a process holds the run's lock now (is training it)."""
        try:
            fd = os.open(self.lock_file, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def start_attempt(self) -> int:
        """Record a new attempt at this run (call it holding the lock); return its number."""
        previous = _read_attempt(self.attempt)
        number = int(previous.get("attempts", 0)) + 1
        write_json_atomic(
            self.attempt,
            {
                "attempts": number,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            },
        )
        return number


def _read_attempt(path: Path) -> dict[str, Any]:
    """attempt.json, validated; {} when absent or bad (it is rewritten by the next attempt)."""
    try:
        return read_json_dict(path, Attempt, fix="")
    except (FileNotFoundError, BadFile):
        return {}


@dataclass(frozen=True)
class RunStatus:
    """What a run folder says about its run, read from the folder alone (nothing in memory)."""

    state: str  # completed | diverged | stopped | running | failed | interrupted | pending
    round: int | None = None  # the last evaluated round in metrics.jsonl
    rounds: int | None = None  # fl.rounds of its config
    attempts: int = 0  # times a process started training it (a resume is an attempt)
    host: str | None = None  # where the latest attempt ran
    pid: int | None = None
    error: str | None = None  # summary.json's error for failed / diverged

    @property
    def group(self) -> str:
        """finished | running | failed | pending."""
        return STATUS_GROUPS[self.state]


def run_status(path: Path) -> RunStatus:
    """The status of the run in folder `path` (which may not exist yet: pending).

    Order matters: a final summary wins; then a held lock (a failed run being retried is
    running); then a failed summary; then a folder with a config but no live process is
    interrupted (resumable); nothing at all is pending.
    """
    folder = RunFolder(path)
    attempt = _read_attempt(folder.attempt)
    try:
        summary = folder.read_summary() or {}
    except BadFile:
        summary = {}  # trained again by the next sweep (fedbench runs says which file is bad)
    config = _read_yaml(folder.config)
    rows = _last_round(folder.metrics)
    pending = RunStatus(
        "pending",
        round=rows,
        rounds=(config.get("fl") or {}).get("rounds") if config else None,
        attempts=int(attempt.get("attempts", 0)),
        host=attempt.get("host"),
        pid=attempt.get("pid"),
        error=summary.get("error"),
    )
    status = summary.get("status")
    if status in FINAL_STATUSES:
        return replace(pending, state=status)
    if folder.is_locked():
        return replace(pending, state="running")
    if status == "failed":
        return replace(pending, state="failed")
    if config is not None:
        return replace(pending, state="interrupted")
    return pending


def _read_yaml(path: Path) -> dict[str, Any] | None:
    try:
        data = load_yaml(read_text(path, fix="", limit=MAX_YAML_BYTES))
    except (FileNotFoundError, BadFile, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def _last_round(metrics: Path) -> int | None:
    rows = read_rows(metrics)  # validated rows; a line being written right now is not one
    return int(rows[-1]["round"]) if rows else None
