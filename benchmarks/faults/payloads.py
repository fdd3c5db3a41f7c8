"""Payloads: YAML python tags and pickles where fedbench reads YAML, checkpoints and arrays; each
payload would create a marker file if it ran."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from benchmarks.faults.context import Context, checksum, killed_run
from benchmarks.faults.harness import run_dirs


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
