"""`fedbench report A B ... --out DIR`: the rows of several table folders in one report.

Tables merge when they share a setting (every field the runs of one folder share is the same in
the others, row and privacy fields aside: sources.check_shared_setting) and their
columns are the same grid keys. DIR becomes a table folder of its own: a plan.json listing every
run of the folders (rows relabelled where two folders have a row of one name, by the settings
that tell them apart: sources.row_labels) and, beside it in DIR/../runs/, a copy of what
a report reads of each run folder not there already (config.yaml, metrics.jsonl, summary.json: a
run folder is named by the hash of its config, so a run shared by two folders is one copy). The
report is then built like any other, and `fedbench report DIR` rebuilds it. The merged plan records its folders (`merged_from`), and a
DIR that holds another table's plan is refused, never overwritten.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fedbench.engine.run_folder import child_folder, write_json_atomic
from fedbench.errors import FedbenchError
from fedbench.files import write_file
from fedbench.readback import BadFile, read_plan_file
from fedbench.report.build import Report, build_report
from fedbench.report.collect import PLAN_FILE
from fedbench.report.sources import Source, check_shared_setting, row_labels
from fedbench.runner.table_config import parse_table_config

MERGED_FROM = "merged_from"


def _check_out(out: Path, folders: list[Path]) -> None:
    for path in (out, *out.parents):
        if path.exists() and not path.is_dir():
            raise FedbenchError(f"--out {out}: {path} is a file; give a folder")
    if out.resolve() in [f.resolve() for f in folders]:
        raise FedbenchError(f"--out {out} is one of the folders merged; give a new folder")
    plan = out / PLAN_FILE
    if not plan.exists():
        return
    try:
        merged = read_plan_file(plan).get(MERGED_FROM)
    except BadFile:
        merged = None
    if not merged:
        raise FedbenchError(
            f"--out {out} holds the plan of another table ({plan}); give a new folder for the "
            "merged report"
        )


def _table(sources: list[Source], labels: dict[tuple[int, str], str], name: str) -> dict[str, Any]:
    """The merged table config: every folder's rows (relabelled), the grid's values of all of
    them, their seeds and metrics; no paper numbers, presets or tuning (each folder's own)."""
    grids = [list(s.table.grid) for s in sources]
    if any(g != grids[0] for g in grids):
        described = "; ".join(
            f"{s.folder}: {', '.join(g) or 'no grid'}" for s, g in zip(sources, grids, strict=True)
        )
        raise FedbenchError(
            f"the folders' columns are not the same grid keys ({described}); merge tables with "
            "the same columns, or draw them together with `fedbench plot A B ...`"
        )
    reports = {s.table.report for s in sources}
    if len(reports) > 1:
        raise FedbenchError(
            f"the folders report different statistics ({', '.join(sorted(reports))}); merge "
            "tables that report the same one"
        )
    grid: dict[str, list[Any]] = {}
    for source in sources:
        for key, values in source.table.grid.items():
            mine = grid.setdefault(key, [])
            mine += [v for v in values if v not in mine]
    methods = {
        labels[(i, method)]: spec
        for i, source in enumerate(sources)
        for method, spec in source.table.methods.items()
        if (i, method) in labels
    }
    first = sources[0].table
    data = {
        "table": name,
        "title": " + ".join(dict.fromkeys(s.table.title or s.table.table for s in sources)),
        "base": first.base,
        "grid": grid,
        "methods": methods,
        "seeds": sorted({seed for s in sources for seed in s.table.seeds}),
        "metrics": list(dict.fromkeys(m for s in sources for m in s.table.metrics)),
        "report": first.report,
        "last_k": first.last_k,
    }
    return parse_table_config(data, "the merged table").model_dump(mode="json")


#: What a report reads of a run folder: the merged report's copy of each run holds these.
RUN_FILES = ("config.yaml", "metrics.jsonl", "summary.json")


def _copy_runs(sources: list[Source], runs_root: Path) -> None:
    """runs_root/<run_id>/ with each run's RUN_FILES, where runs_root does not hold the run
    yet (a run folder is named by its config's hash: one there already is the same run).
    Copies, not links: fedbench reads no link that leads out of its output folder."""
    for source in sources:
        for run in source.plan["runs"]:
            origin = child_folder(source.folder.parent / "runs", run["run_id"])
            here = child_folder(runs_root, run["run_id"])
            if here.exists() or not origin.is_dir():
                continue  # already here, or never started (the report says "not run")
            here.mkdir(parents=True)
            for name in RUN_FILES:
                if (origin / name).is_file():
                    write_file(here / name, (origin / name).read_bytes())


def merge_reports(
    folders: list[Path],
    out: Path,
    *,
    paper_numbers: bool = False,
    metrics: Sequence[str] = (),
    ci: bool = False,
) -> Report:
    """The report of FOLDERS' rows in one table folder OUT (module docstring); the options are
    build_report's."""
    if len(folders) < 2:
        raise FedbenchError("give two table folders or more to merge into one report")
    _check_out(out, folders)
    sources = [Source.read(folder, "test_acc") for folder in folders]
    check_shared_setting(sources)
    labels = row_labels(sources)
    table = _table(sources, labels, out.name)
    runs = [
        {**run, "method": labels[(i, run["method"])]}
        for i, source in enumerate(sources)
        for run in source.plan["runs"]
    ]
    _copy_runs(sources, out.parent / "runs")
    out.mkdir(parents=True, exist_ok=True)
    plan = {
        "table": table,
        "preset": None,
        "overrides": [],
        "tuned": {},
        "fingerprint": None,
        "runs": runs,
        MERGED_FROM: [str(f) for f in folders],
    }
    write_json_atomic(out / PLAN_FILE, json.loads(json.dumps(plan)))
    return build_report(out, paper_numbers=paper_numbers, metrics=metrics, ci=ci)
