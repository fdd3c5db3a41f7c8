"""Which planned runs the local launcher trains together (`runtime.seeds_together`): the runs of
a plan that differ only in `seed`, in groups of at most that many, each group one task of one
worker process (fedbench.engine.run_seeds). Whether a group's runs can really stack (the
vectorised engine takes them; same model and data shapes) is decided in the worker, which
trains the ones that cannot one after the other. The group size is the execution plan's rule
(fedbench.engine.plan.seeds_group_size)."""

from __future__ import annotations

import json

from fedbench.engine.plan import seeds_group_size
from fedbench.runner.table_config import PlannedRun


def seed_groups(runs: list[PlannedRun], gpus: bool) -> list[list[PlannedRun]]:
    """The runs in groups trained together, in plan order (each group where its first run is
    planned); runs that have no seed sibling, or `seeds_together: 1`, are groups of one."""
    cells: dict[str, list[PlannedRun]] = {}
    for run in runs:
        data = run.cfg.to_dict()
        del data["seed"]
        cells.setdefault(json.dumps(data, sort_keys=True), []).append(run)
    groups: list[list[PlannedRun]] = []
    for cell in cells.values():
        size = seeds_group_size(cell[0].cfg, len(cell), gpus)
        groups += [cell[i : i + size] for i in range(0, len(cell), size)]
    first = {run.run_id: i for i, run in enumerate(runs)}
    return sorted(groups, key=lambda group: first[group[0].run_id])
