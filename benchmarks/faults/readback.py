"""Read-back: damaged run files, plans, tuned.yaml and study.db; recovered (the run retrained to
the undisturbed result) or one clean line."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from benchmarks.faults.context import Context, killed_run
from benchmarks.faults.harness import one_clean_line, run_dirs, settled, write_yaml


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
