"""Corruptions: a run killed right after its round-3 checkpoint, then its checkpoint, checksum file
or metrics.jsonl damaged in one way each; the rerun must exit 0 with the undisturbed metrics."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from benchmarks.faults.context import Context, checksum, killed_run
from benchmarks.faults.harness import run_dirs, sha256, tmp_files


def rewrite_checkpoint(run: Path, change: Callable[[object], object]) -> None:
    """Load checkpoint.pt, change it, save it back with a matching checksum file."""
    import torch

    state = torch.load(run / "checkpoint.pt", map_location="cpu", weights_only=True)
    torch.save(change(state), run / "checkpoint.pt")
    checksum(run)


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
