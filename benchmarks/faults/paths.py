"""Paths: table and figure names that point outside --out; any file created outside --out counts."""

from __future__ import annotations

from pathlib import Path

from benchmarks.faults.context import Context, check_clean
from benchmarks.faults.harness import table_config, write_yaml


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
