"""`--dry-run`'s execution plans: how the table's runs would execute here (executor, precision,
compile, CUDA graphs, clipping method, seeds together; fedbench.engine.plan), one line per
distinct plan with the rows that share it. A plan depends on the model and the device, so one
run is prepared per distinct (data, model, runtime) combination - which needs the data on disk:
without it the dry run says so instead - and each row's algorithm is built on that model."""

from __future__ import annotations

import json
from collections.abc import Iterator

from fedbench.runner.table_config import Plan

#: At most this many (data, model, runtime) combinations are prepared (each loads its data and
#: builds its model).
MAX_PREPARED = 24


def _key(cfg_dict: dict, *sections: str) -> str:
    return json.dumps({k: cfg_dict.get(k) for k in sections}, sort_keys=True, default=str)


def execution_plan_lines(plan: Plan, data_missing: bool) -> Iterator[str]:
    """Lines for `--dry-run` (module docstring)."""
    if data_missing:
        yield "execution plans: decided when the runs are prepared (their data is not on disk)"
        return
    import dataclasses

    from fedbench.algorithms import ALGORITHMS
    from fedbench.engine.plan import execution_plan
    from fedbench.engine.setup import RunSetup, param_spec, prepare_run

    shared: dict[tuple[str, ...], list[str]] = {}
    seen: dict[str, tuple[str, ...]] = {}
    prepared: dict[str, RunSetup] = {}
    for run in plan.runs:
        cfg = run.cfg.to_dict()
        key = _key(cfg, "algorithm", "model", "runtime", "privacy", "data")
        if key not in seen:
            base_key = _key(cfg, "model", "runtime", "data")
            if base_key not in prepared:
                if len(prepared) >= MAX_PREPARED:
                    continue
                prepared[base_key] = prepare_run(run.cfg)
            base = prepared[base_key]
            algorithm = ALGORITHMS.get(run.cfg.algorithm.name)(
                run.cfg.algorithm, param_spec(base.model), num_clients=base.num_clients
            )
            setup = dataclasses.replace(base, cfg=run.cfg, algorithm=algorithm)
            seen[key] = tuple(
                f"{c.what} {c.value}" + (f" [fallback: {c.reason}]" if c.fallback else "")
                for c in execution_plan(setup).choices
            )
        rows = shared.setdefault(seen[key], [])
        if run.method not in rows:
            rows.append(run.method)
    yield f"execution plans ({len(shared)} distinct; `fedbench train --print-plan` gives the reasons):"
    for shown, rows in shared.items():
        yield f"  {', '.join(rows)}: {'; '.join(shown)}"
