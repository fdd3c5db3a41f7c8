"""`--dry-run`'s execution plans: how the table's runs would execute here (executor, precision,
compile, CUDA graphs, clipping method, seeds together; fedbench.engine.plan), one line per
distinct plan with the rows that share it. A plan depends on the model and the device, so it is
computed from each distinct (row, model, runtime, privacy) combination's prepared run, which
needs the data on disk: without it the dry run says so instead."""

from __future__ import annotations

import json
from collections.abc import Iterator

from fedbench.runner.table_config import Plan

#: At most this many distinct combinations are prepared (each builds its model and data).
MAX_PREPARED = 24


def _key(cfg_dict: dict) -> str:
    keep = {k: cfg_dict.get(k) for k in ("algorithm", "model", "runtime", "privacy", "data")}
    keep["algorithm"] = {"name": (cfg_dict.get("algorithm") or {}).get("name")}
    return json.dumps(keep, sort_keys=True, default=str)


def execution_plan_lines(plan: Plan, data_missing: bool) -> Iterator[str]:
    """Lines for `--dry-run` (module docstring)."""
    if data_missing:
        yield "execution plans: decided when the runs are prepared (their data is not on disk)"
        return
    from fedbench.engine.plan import execution_plan
    from fedbench.engine.setup import prepare_run

    shared: dict[tuple[str, ...], list[str]] = {}
    seen: dict[str, tuple[str, ...]] = {}
    for run in plan.runs:
        key = _key(run.cfg.to_dict())
        if key not in seen:
            if len(seen) >= MAX_PREPARED:
                continue
            seen[key] = tuple(
                f"{c.what} {c.value}" + (f" [fallback: {c.reason}]" if c.fallback else "")
                for c in execution_plan(prepare_run(run.cfg)).choices
            )
        rows = shared.setdefault(seen[key], [])
        if run.method not in rows:
            rows.append(run.method)
    yield f"execution plans ({len(shared)} distinct; `fedbench train --print-plan` gives the reasons):"
    for shown, rows in shared.items():
        yield f"  {', '.join(rows)}: {'; '.join(shown)}"
