"""The plugins a run or a sweep uses, as the lines `train --print-plan` and `run --dry-run`
end with (fedbench.plugins): each with its version, code hash and what it registered."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fedbench import plugins

if TYPE_CHECKING:
    from fedbench.config import RunConfig
    from fedbench.runner.table_config import Plan


def _unused(used: list[plugins.Plugin]) -> list[str]:
    names = [p.source.name for p in plugins.loaded() if p not in used]
    return [f"plugins loaded, not used by this run: {', '.join(names)}"] if names else []


def run_plugin_lines(cfg: RunConfig) -> list[str]:
    """The plugins that registered a name the run uses (their code hash is part of its run
    id), then those loaded that it does not use."""
    used = cfg.used_plugins()
    lines = [f"plugin: {plugin.line()}" for plugin in used]
    if not used:
        lines.append("plugins: none (every name the run uses is fedbench's own)")
    return lines + _unused(used)


def plan_plugin_lines(plan: Plan) -> list[str]:
    """Each plugin the plan's runs use, with the rows that use it; nothing when no plugin is
    loaded (the dry run of a table of fedbench's own names is unchanged)."""
    rows: dict[int, list[str]] = {}
    for run in plan.runs:
        for plugin in run.cfg.used_plugins():
            methods = rows.setdefault(id(plugin), [])
            if run.method not in methods:
                methods.append(run.method)
    used = [p for p in plugins.loaded() if id(p) in rows]
    lines = [f"plugin: {p.line()}; rows: {', '.join(rows[id(p)])}" for p in used]
    return lines + [line.replace("this run", "this table") for line in _unused(used)]
