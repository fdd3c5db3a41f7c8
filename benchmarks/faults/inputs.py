"""Bad inputs: malformed or hostile configs, numbers and tune flags; each must end in exit code 2
and one line on stderr, with nothing written for a refused command."""

from __future__ import annotations

from benchmarks.faults.context import Context, check_clean


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
