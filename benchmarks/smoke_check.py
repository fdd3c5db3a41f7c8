"""Smoke-check the paper settings within a time budget (part of `make gpu-check`; also useful
on any machine): the covering cells of every table and ablation (fedbench.runner.smoke.coverage)
or all of them, then each figure's smoke check, one line per cell; cells not reached within
--budget seconds are counted, never reported as passed.

    python benchmarks/smoke_check.py [--scope covering|all] [--figures] [--budget S] [--json F]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fedbench.runner.smoke.coverage import all_table_cells, covering  # noqa: E402
from fedbench.runner.smoke.run import run_cells  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scope", choices=["covering", "all"], default="covering")
    parser.add_argument("--figures", action="store_true", help="also every figure's smoke check")
    parser.add_argument("--budget", type=float, default=None, help="seconds; then stop starting")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    t0 = time.perf_counter()
    deadline = None if args.budget is None else t0 + args.budget
    rows: list[dict] = []
    figures: list[dict] = []
    not_reached = 0

    def save() -> None:  # after every cell: a check cut short keeps what it finished
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "scope": args.scope,
                        "rows": rows,
                        "figures": figures,
                        "not_reached": not_reached,
                        "seconds": round(time.perf_counter() - t0, 1),
                    },
                    indent=2,
                )
                + "\n"
            )

    with tempfile.TemporaryDirectory(prefix="fedbench-smoke-data-") as tmp:
        cells = all_table_cells(Path(tmp))
        chosen = covering(cells) if args.scope == "covering" else cells
        print(f"smoke ({args.scope}): {len(chosen)} of {len(cells)} table cells", flush=True)
        for cell in chosen:
            if deadline is not None and time.perf_counter() > deadline:
                not_reached += 1
                continue
            (outcome,) = run_cells([cell], lambda line: print(line, flush=True))
            rows.append(
                {
                    "cell": cell.label,
                    "ok": outcome.ok,
                    # Refused up front by design (an algorithm fedbench does not implement).
                    "refused": outcome.refused,
                    "s": round(outcome.seconds, 2),
                    "error": outcome.error,
                }
            )
    if args.figures:
        from fedbench.figures.registry import FIGURES
        from fedbench.runner.smoke.check import smoke_figure

        for name in FIGURES:
            if deadline is not None and time.perf_counter() > deadline:
                figures.append({"figure": name, "ok": None, "error": "not reached"})
                continue
            report = smoke_figure(name, lambda line: print(line, flush=True))
            figures.append(
                {
                    "figure": name,
                    "ok": report.exit_code == 0,
                    "error": report.error,
                    "s": round(report.seconds, 2),
                }
            )
    failed = [r for r in rows if not r["ok"] and not r["refused"]]
    failed += [f for f in figures if f["ok"] is False]
    summary = {
        "scope": args.scope,
        "cells": len(rows),
        "failed": len(failed),
        "not_reached": not_reached,
        "seconds": round(time.perf_counter() - t0, 1),
        "rows": rows,
        "figures": figures,
    }
    print(
        f"smoke: {len([r for r in rows if r['ok']])}/{len(rows)} cells ok, "
        f"{len([r for r in rows if r['refused']])} refused by design, "
        f"{not_reached} not reached, {summary['seconds']} s",
        flush=True,
    )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
